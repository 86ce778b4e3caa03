import { describe, expect, it } from "vitest";
import type { LeaseRecord } from "../lease-db.js";
import { decideGc, type GcPolicy } from "./gc-plan.js";

const here = { hostId: "host-a", bootId: "boot-1" };
const now = new Date("2026-01-01T12:00:00Z");

function lease(over: Partial<LeaseRecord> = {}): LeaseRecord {
  return {
    id: "row",
    provider: "bubblewrap",
    pluginDir: "/p",
    companyId: "c",
    environmentId: "e",
    runId: "r",
    providerLeaseId: "bwrap-1",
    leaseMetadata: null,
    labels: {},
    state: "active",
    reusable: false,
    config: {},
    configFingerprint: "f",
    expiresAt: null,
    owner: { hostId: "host-a", bootId: "boot-1", pid: 42, startTicks: "1" },
    purpose: "run",
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
    lastError: null,
    ...over,
  };
}

const policy = (over: Partial<GcPolicy> & { status?: "alive" | "gone" | "unknown" } = {}): GcPolicy => ({
  now,
  here,
  yes: false,
  dryRun: false,
  includeIdle: false,
  statusOf: () => over.status ?? "gone",
  ...over,
});

describe("leases gc decisions", () => {
  it("destroys a lease whose owner process is gone, and keeps one in use", () => {
    expect(decideGc(lease(), policy({ status: "gone" })).action).toBe("destroy");
    expect(decideGc(lease({ state: "acquiring" }), policy({ status: "gone" })).action).toBe("destroy");
    expect(decideGc(lease(), policy({ status: "alive" }))).toEqual({ action: "keep", reason: "in use by pid 42" });
  });

  it("keeps idle reusable leases until they expire or --include-idle", () => {
    expect(decideGc(lease({ state: "idle" }), policy()).action).toBe("keep");
    expect(decideGc(lease({ state: "idle", expiresAt: "2026-01-01T11:00:00Z" }), policy()).action).toBe("destroy");
    expect(decideGc(lease({ state: "idle" }), policy({ includeIdle: true })).action).toBe("destroy");
  });

  it("is a dry run for another machine's leases unless --yes, and only when expired", () => {
    const foreign = lease({ owner: { hostId: "host-b", bootId: "x", pid: 1, startTicks: "1" } });
    expect(decideGc(foreign, policy({ status: "unknown" })).action).toBe("keep");
    const expired = { ...foreign, expiresAt: "2026-01-01T11:00:00Z" };
    expect(decideGc(expired, policy({ status: "unknown" })).action).toBe("dry-run");
    expect(decideGc(expired, policy({ status: "unknown", yes: true })).action).toBe("destroy");
  });

  it("--dry-run acts on nothing", () => {
    expect(decideGc(lease(), policy({ dryRun: true })).action).toBe("dry-run");
  });
});
