import { describe, expect, it } from "vitest";
import {
  assertLeaseNameOwnedBy,
  assertOwnedBy,
  defineLabelPolicy,
  defineLeaseLister,
  encodeLeaseName,
  isProviderLeaseLister,
  labelValue,
  leaseLabels,
  LeaseOwnershipError,
  leaseNameHash,
  parseLeaseName,
} from "./index.js";

const owner = { driverKey: "boxd", companyId: "3f1c2b9e-6a5d-4c3b-8a7f-1e2d3c4b5a69", environmentId: "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d" };

describe("leaseLabels", () => {
  it("names provider, company, environment and run", () => {
    expect(leaseLabels({ ...owner, runId: "run-1" })).toEqual({
      "paperclip-provider": "boxd",
      "paperclip-company": owner.companyId,
      "paperclip-environment": owner.environmentId,
      "paperclip-run": "run-1",
    });
  });

  it("keeps two long ids that share a start apart (the cut value ends in a hash of the whole)", () => {
    const a = labelValue(`${"x".repeat(70)}-a`);
    const b = labelValue(`${"x".repeat(70)}-b`);
    expect(a).toHaveLength(63);
    expect(b).toHaveLength(63);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^x+-[0-9a-f]{8}$/);
    expect(labelValue(`${"x".repeat(70)}-a`)).toBe(a);
  });

  it("follows a vendor's policy: length, characters, case", () => {
    const strict = defineLabelPolicy({ maxValueLength: 20, allowed: /[a-z0-9-]/, case: "lower" });
    const value = labelValue("Env_Prod.EU/West-with-a-long-tail", strict);
    expect(value.length).toBeLessThanOrEqual(20);
    expect(value).toMatch(/^[a-z0-9-]+$/);
    expect(value).toMatch(/^env-prod-eu-[0-9a-f-]+$/);
    const preserving = defineLabelPolicy({ allowed: /[A-Za-z0-9._-]/, case: "preserve" });
    expect(labelValue("Run_42.A", preserving)).toBe("Run_42.A");
    for (const v of Object.values(leaseLabels({ ...owner, runId: "R".repeat(90) }, strict))) expect(v.length).toBeLessThanOrEqual(20);
  });

  it("refuses a policy the kit's keys or hash suffix could not follow", () => {
    expect(() => defineLabelPolicy({ allowed: /[a-z_-]/ })).toThrow(/must include 0-9 and a-f/);
    expect(() => defineLabelPolicy({ allowed: /[a-z0-9_]/, replacement: "_" })).toThrow(/label key paperclip-provider must be allowed/);
    expect(() => defineLabelPolicy({ maxKeyLength: 20 })).toThrow(/the label key paperclip-environment must be allowed/);
    expect(() => defineLabelPolicy({ replacement: "/" })).toThrow(/replacement/);
    expect(() => defineLabelPolicy({ maxValueLength: 8 })).toThrow(/maxValueLength must be an integer of at least 16/);
  });
});

describe("assertOwnedBy", () => {
  const labels = leaseLabels({ ...owner, runId: "r1" });

  it("lets a hook touch its own provider's, company's and environment's resource", () => {
    expect(() => assertOwnedBy(labels, owner)).not.toThrow();
    expect(() => assertOwnedBy(labels, { ...owner, companyId: owner.companyId.toUpperCase() })).not.toThrow();
  });

  it("refuses another company's or environment's resource, or one without labels, saying which label differs", () => {
    let error: unknown;
    try {
      assertOwnedBy(labels, { ...owner, companyId: "other-company" }, { resource: "sandbox sb-1" });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(LeaseOwnershipError);
    expect((error as LeaseOwnershipError).code).toBe("lease_not_owned");
    expect((error as LeaseOwnershipError).message).toBe(
      `refusing to touch sandbox sb-1: it does not belong to this provider, company and environment (paperclip-company is "${owner.companyId}", expected "other-company")`,
    );
    expect(() => assertOwnedBy(labels, { ...owner, environmentId: "env-2" })).toThrow(/paperclip-environment is/);
    expect(() => assertOwnedBy(labels, { ...owner, driverKey: "daytona" })).toThrow(/paperclip-provider is "boxd", expected "daytona"/);
    const { "paperclip-company": _dropped, ...withoutCompany } = labels;
    expect(() => assertOwnedBy(withoutCompany, owner)).toThrow(/paperclip-company missing/);
    expect(() => assertOwnedBy(undefined, owner)).toThrow(/paperclip-provider missing; paperclip-company missing; paperclip-environment missing/);
  });
});

describe("lease names for vendors without labels", () => {
  it("encodes provider, company, environment and run hashes in a DNS label that parses back", () => {
    const name = encodeLeaseName({ ...owner, runId: "run-7" }, { prefix: "pcs" });
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name).toMatch(/^[a-z][a-z0-9-]*[a-z0-9]$/);
    expect(parseLeaseName(name, { prefix: "pcs" })).toEqual({
      provider: leaseNameHash("provider", "boxd"),
      company: leaseNameHash("company", owner.companyId),
      environment: leaseNameHash("environment", owner.environmentId),
      run: leaseNameHash("run", "run-7"),
      nonce: name.slice(-8),
    });
    expect(encodeLeaseName({ ...owner, runId: "run-7" })).not.toBe(encodeLeaseName({ ...owner, runId: "run-7" }));
  });

  it("ignores names that are not ours and respects the vendor's length limit", () => {
    const name = encodeLeaseName({ ...owner, runId: "r" });
    expect(parseLeaseName(name, { prefix: "other" })).toBeUndefined();
    expect(parseLeaseName("ci-runner-1")).toBeUndefined();
    expect(parseLeaseName(`${name}x`)).toBeUndefined();
    expect(() => encodeLeaseName({ ...owner, runId: "r" }, { maxLength: 40 })).toThrow(/do not fit the vendor's limit of 40/);
    expect(() => encodeLeaseName({ ...owner, runId: "r" }, { prefix: "Bad-Prefix" })).toThrow(/lease name prefix/);
  });

  it("refuses to destroy a named resource of another company or environment", () => {
    const name = encodeLeaseName({ ...owner, runId: "r" });
    expect(() => assertLeaseNameOwnedBy(name, owner)).not.toThrow();
    expect(() => assertLeaseNameOwnedBy(name, { ...owner, companyId: "c2" })).toThrow(LeaseOwnershipError);
    expect(() => assertLeaseNameOwnedBy(name, { ...owner, environmentId: "e2" })).toThrow(/name environment hash/);
    expect(() => assertLeaseNameOwnedBy("someone-elses-box", owner)).toThrow(/refusing to touch "someone-elses-box"/);
  });
});

describe("defineLeaseLister", () => {
  it("marks a lister so it can be told from an older listLeases(stateDir) export", () => {
    const lister = defineLeaseLister(async () => []);
    expect(isProviderLeaseLister(lister)).toBe(true);
    expect(isProviderLeaseLister(async (_stateDir?: string) => [])).toBe(false);
    expect(isProviderLeaseLister(undefined)).toBe(false);
  });
});
