import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { cappedTtlMs, createTtlKeepers, keepTtlAlive } from "./ttl-keeper.js";

describe("cappedTtlMs", () => {
  const now = 1_000_000;
  it("is the TTL when there is no cap or the cap is far", () => {
    expect(cappedTtlMs(300_000, null, { now })).toBe(300_000);
    expect(cappedTtlMs(300_000, now + 3_600_000, { granularityMs: 1000, now })).toBe(300_000);
  });
  it("ends at least one granule before the cap, rounded down to whole granules", () => {
    // 10.5 s to the cap, 1 s kept for latency: 9.5 s, rounded down to 9 s.
    expect(cappedTtlMs(300_000, now + 10_500, { granularityMs: 1000, now })).toBe(9_000);
    expect(cappedTtlMs(300_000, now + 10_500, { granularityMs: 1000, marginMs: 0, now })).toBe(10_000);
  });
  it("is zero when no whole granule fits before the cap", () => {
    expect(cappedTtlMs(300_000, now + 1_900, { granularityMs: 1000, now })).toBe(0);
    expect(cappedTtlMs(300_000, now - 5, { granularityMs: 1000, now })).toBe(0);
  });
});

describe("keepTtlAlive", () => {
  it("refreshes every interval with the TTL, until stopped", async () => {
    const asked: number[] = [];
    const keeper = keepTtlAlive({ ttlMs: 60_000, capAt: null, everyMs: 20, refresh: async (ms) => void asked.push(ms) });
    await sleep(110);
    keeper.stop();
    const seen = asked.length;
    await sleep(60);
    expect(seen).toBeGreaterThanOrEqual(3);
    expect(asked.length).toBe(seen);
    expect(new Set(asked)).toEqual(new Set([60_000]));
    expect(keeper.stopped).toBe(true);
  });

  it("never asks past the cap, and stops once nothing fits before it", async () => {
    let clock = 0;
    const asked: number[] = [];
    const keeper = keepTtlAlive({ ttlMs: 10_000, capAt: 6_500, everyMs: 5, now: () => clock, refresh: async (ms) => void asked.push(clock + ms) });
    for (clock = 0; clock <= 7_000 && !keeper.stopped; clock += 1_000) await sleep(8);
    expect(asked.length).toBeGreaterThan(0);
    expect(Math.max(...asked)).toBeLessThanOrEqual(6_500);
    expect(keeper.stopped).toBe(true);
  });

  it("keeps going after a failed refresh, reporting it", async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const keeper = keepTtlAlive({
      ttlMs: 60_000,
      capAt: null,
      everyMs: 10,
      refresh: async () => {
        calls += 1;
        if (calls === 1) throw new Error("503");
      },
      onError: (error) => errors.push(error),
    });
    await sleep(60);
    keeper.stop();
    expect(errors).toHaveLength(1);
    expect(calls).toBeGreaterThan(1);
  });

  it("skips refreshes while the lease is idle, and resumes them when it is in use again", async () => {
    let busy = false;
    let calls = 0;
    const keeper = keepTtlAlive({ ttlMs: 60_000, capAt: null, everyMs: 10, active: () => busy, refresh: async () => void (calls += 1) });
    await sleep(60);
    expect(calls).toBe(0);
    busy = true;
    await sleep(60);
    keeper.stop();
    expect(calls).toBeGreaterThan(0);
  });

  it("refuses a TTL shorter than its granularity", () => {
    expect(() => keepTtlAlive({ ttlMs: 500, capAt: null, refresh: async () => undefined })).toThrow(/ttlMs: must be at least 1000/);
  });

  it("createTtlKeepers: one keeper per id, replaced on keep, stopped on stop", async () => {
    const keepers = createTtlKeepers();
    const asked: string[] = [];
    keepers.keep("a", { ttlMs: 60_000, capAt: null, everyMs: 10, refresh: async () => void asked.push("a1") });
    keepers.keep("a", { ttlMs: 60_000, capAt: null, everyMs: 10, refresh: async () => void asked.push("a2") });
    await sleep(45);
    expect(keepers.has("a")).toBe(true);
    keepers.stop("a");
    expect(keepers.has("a")).toBe(false);
    expect(asked.every((x) => x === "a2")).toBe(true);
    keepers.stopAll();
  });
});
