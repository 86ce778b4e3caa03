import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { buildSentinel, CreationCleanupError, leaseFingerprint, leaseLabels, resolveLeaseExpiry, REUSE_SENTINEL_PATH, sentinelNamesFingerprint } from "./index.js";

const base = { companyId: "c1", environmentId: "e1", agentId: "a1", executionWorkspaceId: "w1", adapterType: "claude" };

describe("leaseFingerprint", () => {
  it("is a sha256 hex independent of key order and undefined fields", () => {
    const a = leaseFingerprint({ ...base, resource: { image: "x", cpu: 2 } });
    const b = leaseFingerprint({ resource: { cpu: 2, image: "x", extra: undefined }, adapterType: "claude", executionWorkspaceId: "w1", agentId: "a1", environmentId: "e1", companyId: "c1" });
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(b).toBe(a);
  });

  it("changes with every identity field and with the resource shape", () => {
    const reference = leaseFingerprint(base);
    for (const key of ["companyId", "environmentId", "agentId", "executionWorkspaceId", "adapterType"] as const) {
      expect(leaseFingerprint({ ...base, [key]: "other" }), key).not.toBe(reference);
    }
    expect(leaseFingerprint({ ...base, resource: { image: "y" } })).not.toBe(reference);
    expect(leaseFingerprint({ ...base, agentId: undefined })).not.toBe(reference);
  });
});

describe("sentinel", () => {
  it("matches only the fingerprint it was built with", () => {
    const text = buildSentinel({ fingerprint: "abc", providerLeaseId: "lease-1" });
    expect(REUSE_SENTINEL_PATH).toBe(".paperclip-runtime/reusable-sandbox-lease.json");
    expect(JSON.parse(text)).toMatchObject({ fingerprint: "abc", providerLeaseId: "lease-1" });
    expect(sentinelNamesFingerprint(text, "abc")).toBe(true);
    expect(sentinelNamesFingerprint(text, "abd")).toBe(false);
    expect(sentinelNamesFingerprint("not json", "abc")).toBe(false);
    expect(sentinelNamesFingerprint("", "abc")).toBe(false);
    expect(sentinelNamesFingerprint("null", "abc")).toBe(false);
  });
});

describe("leaseLabels", () => {
  it("sanitizes values to [a-z0-9-_.] and 63 characters", () => {
    const labels = leaseLabels({ driverKey: "Fake-Plugin", companyId: "Company-1", environmentId: "env/ID with spaces", runId: `run-${"x".repeat(100)}` });
    expect(labels["paperclip-provider"]).toBe("fake-plugin");
    expect(labels["paperclip-environment"]).toBe("env-id-with-spaces");
    expect(labels["paperclip-run"]).toHaveLength(63);
    for (const value of Object.values(labels)) expect(value).toMatch(/^[a-z0-9\-_.]{1,63}$/);
  });
});

describe("resolveLeaseExpiry", () => {
  const now = new Date("2026-09-01T00:00:00.000Z");

  it("is unbounded without a TTL or a request", () => {
    expect(resolveLeaseExpiry({ now })).toEqual({ expiresAt: null });
  });

  it("takes the earlier of the default TTL and the requested deadline", () => {
    expect(resolveLeaseExpiry({ now, defaultTtlMs: 60_000, requestedExpiresAt: "2026-09-01T01:00:00Z" }).expiresAt?.toISOString()).toBe("2026-09-01T00:01:00.000Z");
    expect(resolveLeaseExpiry({ now, defaultTtlMs: 7_200_000, requestedExpiresAt: "2026-09-01T01:00:00Z" }).expiresAt?.toISOString()).toBe("2026-09-01T01:00:00.000Z");
    expect(resolveLeaseExpiry({ now, requestedExpiresAt: "2026-09-01T00:30:00Z" }).expiresAt?.toISOString()).toBe("2026-09-01T00:30:00.000Z");
  });

  it("refuses invalid or past requested deadlines", () => {
    expect(() => resolveLeaseExpiry({ now, requestedExpiresAt: "tomorrow-ish" })).toThrow(/not a valid ISO 8601/);
    expect(() => resolveLeaseExpiry({ now, requestedExpiresAt: "2026-08-31T23:59:59Z" })).toThrow(/not in the future/);
  });
});

describe("CreationCleanupError", () => {
  const cleanup = { providerLeaseId: "sbx-42", companyId: "c1", environmentId: "e1", runId: "r1", labels: { "paperclip-run": "r1" } };

  it("names the resource and the cause in its message", () => {
    const error = new CreationCleanupError(cleanup, new Error("workspace setup failed"));
    expect(error.message).toContain("sbx-42");
    expect(error.message).toContain("workspace setup failed");
    expect(error.cleanup).toEqual(cleanup);
  });

  it("never keeps or serializes the inner error", () => {
    const inner = Object.assign(new Error("boom"), { headers: { authorization: "Bearer sekrit-token" } });
    const error = new CreationCleanupError(cleanup, inner);
    expect(JSON.stringify(error)).not.toContain("sekrit-token");
    expect(inspect(error, { depth: 10 })).not.toContain("sekrit-token");
    expect(JSON.parse(JSON.stringify(error))).toMatchObject({ code: "CREATION_CLEANUP_REQUIRED", cleanup });
  });

  it("can redact the cause's message", () => {
    const error = new CreationCleanupError(cleanup, new Error("token sekrit-token rejected"), { redact: (t) => t.replace("sekrit-token", "[REDACTED]") });
    expect(error.message).not.toContain("sekrit-token");
  });
});
