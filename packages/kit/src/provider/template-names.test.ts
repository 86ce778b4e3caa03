import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { assertOwnedBy, LeaseOwnershipError, ownerLabels } from "../lease/ownership.js";
import { isOwnedTemplateName, ownedTemplateName, templateNameOwner } from "./template-names.js";

const who = { driverKey: "daytona", companyId: randomUUID(), environmentId: randomUUID() };
const owner = ownerLabels(who);

describe("template names that carry their owner", () => {
  it("are a short digest form, fresh each time, read back as their owner's; names made otherwise are not templates", () => {
    const name = ownedTemplateName(owner);
    expect(name).toMatch(/^pc-[0-9a-f]{16}-[0-9a-f]{8}$/);
    expect(isOwnedTemplateName(name)).toBe(true);
    expect(templateNameOwner(name, owner)).toEqual(owner);
    expect(() => assertOwnedBy(templateNameOwner(name, owner)!, who)).not.toThrow();
    expect(ownedTemplateName(owner)).not.toBe(name);
    // The same owner always gets the same digest, so every capture of theirs is readable by them.
    expect(ownedTemplateName(owner).slice(0, 19)).toBe(name.slice(0, 19));
    for (const other of ["daytonaio/sandbox:0.8.0", "base", `${name}0`, name.slice(0, -1), name.toUpperCase(), "pc-", ""]) {
      expect(isOwnedTemplateName(other)).toBe(false);
      expect(templateNameOwner(other, owner)).toBeNull();
    }
  });

  it("another provider's, company's or environment's name is refused by the ownership check, not taken for absent", () => {
    for (const stranger of [
      { ...who, driverKey: "e2b" },
      { ...who, companyId: randomUUID() },
      { ...who, environmentId: randomUUID() },
      // Ids that would run together if the digest joined them without a separator.
      { ...who, companyId: `${who.companyId}${who.environmentId.slice(0, 4)}`, environmentId: who.environmentId.slice(4) },
    ]) {
      const theirs = ownedTemplateName(ownerLabels(stranger));
      const labels = templateNameOwner(theirs, owner);
      expect(labels).not.toBeNull();
      expect(() => assertOwnedBy(labels!, who, { resource: "template" })).toThrow(LeaseOwnershipError);
      // And the other way round.
      expect(() => assertOwnedBy(templateNameOwner(ownedTemplateName(owner), ownerLabels(stranger))!, stranger)).toThrow(LeaseOwnershipError);
    }
  });

  it("a name of the previous release's long form still reads as its owner's, and is refused for any other", () => {
    const legacy = `paperclip-tpl-36-${owner["paperclip-company"]}-36-${owner["paperclip-environment"]}-0123456789ab`;
    expect(isOwnedTemplateName(legacy)).toBe(true);
    expect(templateNameOwner(legacy, owner)).toEqual(owner);
    const stranger = { ...who, companyId: randomUUID() };
    expect(() => assertOwnedBy(templateNameOwner(legacy, ownerLabels(stranger))!, stranger)).toThrow(LeaseOwnershipError);
    // Lengths are checked, so a shifted or truncated long name is no template at all.
    expect(templateNameOwner(legacy.replace("paperclip-tpl-36-", "paperclip-tpl-37-"), owner)).toBeNull();
    expect(templateNameOwner(legacy.slice(0, -1), owner)).toBeNull();
    expect(templateNameOwner(`${legacy}0`, owner)).toBeNull();
    expect(templateNameOwner("paperclip-tpl-", owner)).toBeNull();
  });

  it("a setup sandbox without all its owner labels gets no name", () => {
    expect(() => ownedTemplateName({ "paperclip-company": "c", "paperclip-environment": "e" })).toThrow(/paperclip-provider/);
    expect(() => ownedTemplateName({ "paperclip-provider": "p", "paperclip-company": "c" })).toThrow(/paperclip-environment/);
  });
});
