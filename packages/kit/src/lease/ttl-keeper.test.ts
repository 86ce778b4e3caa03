import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
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
  // Fake timers: each test advances time by exactly the intervals it means, so a busy machine
  // cannot change how many refreshes happen.
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());
  const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

  it("refreshes every interval with the TTL, until stopped", async () => {
    const asked: number[] = [];
    const keeper = keepTtlAlive({ ttlMs: 60_000, capAt: null, everyMs: 20, refresh: async (ms) => void asked.push(ms) });
    await advance(19);
    expect(asked).toEqual([]);
    await advance(1);
    expect(asked).toEqual([60_000]);
    await advance(40);
    expect(asked).toEqual([60_000, 60_000, 60_000]);
    keeper.stop();
    await advance(200);
    expect(asked).toHaveLength(3);
    expect(keeper.stopped).toBe(true);
  });

  it("never asks past the cap, and stops once nothing fits before it", async () => {
    const start = Date.now();
    const asked: number[] = [];
    const keeper = keepTtlAlive({ ttlMs: 10_000, capAt: start + 6_500, everyMs: 1_000, refresh: async (ms) => void asked.push(Date.now() + ms - start) });
    await advance(7_000);
    // At t=1..4 s the cap allows 4, 3, 2, 1 whole seconds (one kept for latency); at 5 s none fits.
    expect(asked).toEqual([5_000, 5_000, 5_000, 5_000]);
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
    await advance(30);
    keeper.stop();
    expect(errors).toEqual([new Error("503")]);
    expect(calls).toBe(3);
  });

  it("skips refreshes while the lease is idle, and resumes them when it is in use again", async () => {
    let busy = false;
    let calls = 0;
    const keeper = keepTtlAlive({ ttlMs: 60_000, capAt: null, everyMs: 10, active: () => busy, refresh: async () => void (calls += 1) });
    await advance(50);
    expect(calls).toBe(0);
    busy = true;
    await advance(20);
    keeper.stop();
    expect(calls).toBe(2);
  });

  it("refuses a TTL shorter than its granularity", () => {
    expect(() => keepTtlAlive({ ttlMs: 500, capAt: null, refresh: async () => undefined })).toThrow(/ttlMs: must be at least 1000/);
  });

  it("createTtlKeepers: one keeper per id, replaced on keep, stopped on stop", async () => {
    const keepers = createTtlKeepers();
    const asked: string[] = [];
    keepers.keep("a", { ttlMs: 60_000, capAt: null, everyMs: 10, refresh: async () => void asked.push("a1") });
    keepers.keep("a", { ttlMs: 60_000, capAt: null, everyMs: 10, refresh: async () => void asked.push("a2") });
    await advance(30);
    expect(keepers.has("a")).toBe(true);
    expect(asked).toEqual(["a2", "a2", "a2"]);
    keepers.stop("a");
    expect(keepers.has("a")).toBe(false);
    await advance(30);
    expect(asked).toHaveLength(3);
    keepers.stopAll();
  });
});
