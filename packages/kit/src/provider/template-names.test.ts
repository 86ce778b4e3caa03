import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { digestTemplateName, digestTemplateNameOwner, isDigestTemplateName, isOwnedTemplateName, ownedTemplateName, templateNameOwner } from "./template-names.js";

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

describe("short template names that carry a digest of their owner", () => {
  it("fresh each time, under 64 characters, checked against their owner only", () => {
    const ids = { ...owner, "paperclip-company": randomUUID(), "paperclip-environment": randomUUID() };
    const name = digestTemplateName(ids);
    expect(name).toMatch(/^pc-[0-9a-f]{16}-[0-9a-f]{8}$/);
    expect(isDigestTemplateName(name)).toBe(true);
    expect(digestTemplateName(ids)).not.toBe(name);
    expect(digestTemplateNameOwner(name, ids)).toEqual(ids);
  });

  it("another company, environment or provider reads as another owner; another shape as no template", () => {
    const name = digestTemplateName(owner);
    for (const key of ["paperclip-provider", "paperclip-company", "paperclip-environment"]) {
      const other = { ...owner, [key]: "someone-else" };
      const read = digestTemplateNameOwner(name, other);
      expect(read).not.toBeNull();
      expect(read).not.toEqual(other);
    }
    expect(digestTemplateNameOwner("node:22", owner)).toBeNull();
    expect(digestTemplateNameOwner(`${name}0`, owner)).toBeNull();
    expect(isDigestTemplateName("pc-0123")).toBe(false);
  });
});
