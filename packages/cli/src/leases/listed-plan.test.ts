import { describe, expect, it } from "vitest";
import type { LeaseRecord } from "../lease-db.js";
import { decideListedLease, type ListedLeaseContext } from "./listed-plan.js";
import type { ListedLease } from "./provider-lister.js";

const now = new Date("2026-01-01T12:00:00Z");
const old = "2026-01-01T10:00:00Z";
const labels = { "paperclip-provider": "hosted", "paperclip-company": "paperclip-sandbox-cli", "paperclip-environment": "cli-host-a" };

const listed = (over: Partial<ListedLease> = {}): ListedLease => ({ providerLeaseId: "sb-1", labels, ownerAlive: undefined, expired: false, createdAt: old, ...over });
const row = (over: Partial<LeaseRecord> = {}): LeaseRecord => ({
  id: "row",
  provider: "hosted",
  pluginDir: "/p",
  companyId: "paperclip-sandbox-cli",
  environmentId: "cli-host-a",
  runId: "r",
  providerLeaseId: "sb-1",
  leaseMetadata: null,
  labels: {},
  state: "active",
  reusable: false,
  config: {},
  configFingerprint: "f",
  expiresAt: null,
  owner: { hostId: "host-b", bootId: "x", pid: 42, startTicks: "1" },
  purpose: "run",
  createdAt: old,
  updatedAt: old,
  lastError: null,
  ...over,
});
const ctx = (over: Partial<ListedLeaseContext> = {}): ListedLeaseContext => ({
  driverKey: "hosted",
  requireProviderLabel: true,
  known: [],
  alreadyTargeted: false,
  now,
  minAgeMs: 10 * 60_000,
  yes: false,
  dryRun: false,
  ourEnvironment: "cli-host-a",
  ourCompany: "paperclip-sandbox-cli",
  statusOf: () => "unknown",
  ...over,
});

describe("leases gc: a lease the provider listed", () => {
  it("destroys this machine's orphan the database does not know", () => {
    expect(decideListedLease(listed(), ctx())).toEqual({ action: "destroy", reason: "not in the lease database" });
  });

  it("leaves a lease labelled for another provider, or unlabelled, alone", () => {
    expect(decideListedLease(listed({ labels: { ...labels, "paperclip-provider": "daytona" } }), ctx())).toEqual({ action: "keep", reason: "labelled for provider daytona" });
    expect(decideListedLease(listed({ labels: {} }), ctx())?.action).toBe("keep");
    // the older state-dir listing carries no such promise
    expect(decideListedLease(listed({ labels: {} }), ctx({ requireProviderLabel: false, yes: true }))?.action).toBe("destroy");
  });

  it("never touches a lease a running process here holds, nor one a live worker holds", () => {
    expect(decideListedLease(listed({ expired: true }), ctx({ known: [row()], statusOf: () => "alive" }))).toEqual({ action: "keep", reason: "in use by pid 42 (lease database)" });
    expect(decideListedLease(listed(), ctx({ known: [], statusOf: () => "alive" }))?.action).toBe("destroy");
    expect(decideListedLease(listed({ ownerAlive: true }), ctx())?.action).toBe("keep");
  });

  it("a lease active in the database is kept unless the provider reports it expired or its owner gone", () => {
    expect(decideListedLease(listed(), ctx({ known: [row()] }))).toEqual({ action: "keep", reason: "active in the lease database" });
    expect(decideListedLease(listed({ expired: true }), ctx({ known: [row()] }))).toEqual({ action: "destroy", reason: "active in the lease database; expired at the provider" });
    expect(decideListedLease(listed({ ownerAlive: false }), ctx({ known: [row()] }))).toEqual({ action: "destroy", reason: "active in the lease database; its owner is gone (the provider says)" });
    expect(decideListedLease(listed(), ctx({ known: [row({ state: "released" })] }))).toEqual({ action: "destroy", reason: "recorded as released but still present" });
    expect(decideListedLease(listed(), ctx({ known: [row()], alreadyTargeted: true }))).toBeUndefined();
  });

  it("keeps a young lease (an acquire may be in flight) unless it is expired", () => {
    const young = listed({ createdAt: "2026-01-01T11:59:00Z" });
    expect(decideListedLease(young, ctx())).toEqual({ action: "keep", reason: "not in the lease database; younger than --min-age" });
    expect(decideListedLease({ ...young, expired: true }, ctx())?.action).toBe("destroy");
  });

  it("another machine's, another company's or the host's lease is a dry run unless --yes; --dry-run acts on nothing", () => {
    const hosts = listed({ labels: { ...labels, "paperclip-company": "3f1c2b9e", "paperclip-environment": "9a8b7c6d" } });
    expect(decideListedLease(hosts, ctx())).toEqual({ action: "dry-run", reason: "not in the lease database; not created by this machine's CLI (use --yes)" });
    expect(decideListedLease(hosts, ctx({ yes: true }))).toEqual({ action: "destroy", reason: "not in the lease database (--yes)" });
    expect(decideListedLease(listed({ labels: { ...labels, "paperclip-company": "other" } }), ctx())?.action).toBe("dry-run");
    expect(decideListedLease(listed(), ctx({ dryRun: true }))).toEqual({ action: "dry-run", reason: "not in the lease database" });
  });
});
