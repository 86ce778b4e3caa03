import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { isOwnedTemplateName, ownedTemplateName, templateNameOwner } from "./template-names.js";

const owner = { "paperclip-provider": "daytona", "paperclip-company": "company-1", "paperclip-environment": "env-1" };

describe("template names that carry their owner", () => {
  it("read back exactly, fresh each time; names made otherwise are not templates", () => {
    const name = ownedTemplateName(owner);
    expect(name).toMatch(/^paperclip-tpl-9-company-1-5-env-1-[0-9a-f]{12}$/);
    expect(isOwnedTemplateName(name)).toBe(true);
    expect(templateNameOwner(name, "daytona")).toEqual(owner);
    expect(ownedTemplateName(owner)).not.toBe(name);
    expect(isOwnedTemplateName("daytonaio/sandbox:0.8.0")).toBe(false);
    expect(templateNameOwner("daytonaio/sandbox:0.8.0", "daytona")).toBeNull();
  });

  it("an id cannot be stretched over the other: lengths are checked, so a shifted or truncated name reads as no template", () => {
    const company = randomUUID();
    const environment = randomUUID();
    const name = ownedTemplateName({ ...owner, "paperclip-company": company, "paperclip-environment": environment });
    expect(templateNameOwner(name, "e2b")).toEqual({ "paperclip-provider": "e2b", "paperclip-company": company, "paperclip-environment": environment });
    expect(templateNameOwner(name.replace("paperclip-tpl-36-", "paperclip-tpl-37-"), "e2b")).toBeNull();
    expect(templateNameOwner(name.slice(0, -1), "e2b")).toBeNull();
    expect(templateNameOwner(`${name}0`, "e2b")).toBeNull();
    expect(templateNameOwner("paperclip-tpl-", "e2b")).toBeNull();
  });

  it("a setup sandbox without its owner labels gets no name", () => {
    expect(() => ownedTemplateName({ "paperclip-company": "c" })).toThrow(/paperclip-environment/);
  });
});
