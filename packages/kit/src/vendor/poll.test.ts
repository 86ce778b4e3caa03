import { describe, expect, it } from "vitest";
import { isPollTimeoutError, pollUntil, PollTimeoutError } from "./index.js";

/** A clock that only moves when the poll sleeps: every pause is recorded, none is waited. */
function manualClock() {
  let t = 0;
  const pauses: number[] = [];
  return {
    pauses,
    now: () => t,
    advance: (ms: number) => (t += ms),
    sleep: async (ms: number, signal: AbortSignal | undefined) => {
      signal?.throwIfAborted();
      pauses.push(ms);
      t += ms;
    },
  };
}

/** A vendor state that reads as `states[i]` on the i-th read, then stays at the last one. */
function reads<T>(...states: T[]) {
  let i = 0;
  const read = async () => states[Math.min(i++, states.length - 1)]!;
  return { read, count: () => i };
}

describe("pollUntil", () => {
  it("returns the first value that is done, without a pause after it", async () => {
    const clock = manualClock();
    const state = reads("building", "building", "ready");
    await expect(pollUntil(state.read, (s) => s === "ready", { what: "the build", ...clock })).resolves.toBe("ready");
    expect(state.count()).toBe(3);
    expect(clock.pauses).toEqual([100, 200]);
  });

  it("grows the pause by the factor up to the cap", async () => {
    const clock = manualClock();
    const state = reads(...Array.from({ length: 8 }, () => "pending"), "ready");
    await pollUntil(state.read, (s) => s === "ready", { what: "x", intervalMs: 50, maxIntervalMs: 1_500, factor: 1.4, ...clock });
    expect(clock.pauses).toEqual([50, 70, 98, 138, 194, 272, 381, 534]);
    const capped = manualClock();
    await pollUntil(reads(...Array.from({ length: 6 }, () => 0), 1).read, (n) => n === 1, { what: "x", intervalMs: 25, maxIntervalMs: 500, ...capped });
    expect(capped.pauses).toEqual([25, 50, 100, 200, 400, 500]);
  });

  it("reports the deadline as a timeout naming what was awaited and where the last read stood", async () => {
    const clock = manualClock();
    const state = reads("starting");
    const error = await pollUntil(state.read, (s) => s === "running", {
      what: "machine m-1 to run",
      timeoutMs: 1_000,
      intervalMs: 100,
      maxIntervalMs: 400,
      describe: (s) => `it is ${s}`,
      ...clock,
    }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PollTimeoutError);
    expect(isPollTimeoutError(error)).toBe(true);
    expect(error).toMatchObject({ code: "timeout", what: "machine m-1 to run", timeoutMs: 1_000, last: "it is starting" });
    expect((error as Error).message).toBe("timed out after 1 s waiting for machine m-1 to run (it is starting)");
    // No pause reaches past the deadline: 100 + 200 + 400 = 700, and another 400 would end at 1100.
    expect(clock.pauses).toEqual([100, 200, 400]);
    expect(state.count()).toBe(4);
  });

  it("counts the reads' own time against the deadline", async () => {
    const clock = manualClock();
    let reads = 0;
    const slowRead = async () => {
      reads += 1;
      clock.advance(600);
      return "pending";
    };
    await expect(pollUntil(slowRead, () => false, { what: "the snapshot", timeoutMs: 1_000, ...clock })).rejects.toThrow("timed out after 1 s waiting for the snapshot");
    expect(reads).toBe(2);
    expect(clock.pauses).toEqual([100]);
  });

  it("waits without a deadline until the signal aborts, then rejects with its reason", async () => {
    const clock = manualClock();
    const abort = new AbortController();
    const reason = new Error("the acquire was cancelled");
    let count = 0;
    const read = async () => {
      count += 1;
      if (count === 50) abort.abort(reason);
      return "pending";
    };
    await expect(pollUntil(read, () => false, { what: "x", signal: abort.signal, ...clock })).rejects.toBe(reason);
    expect(count).toBe(50);
  });

  it("does not read at all when the signal has already aborted", async () => {
    const abort = new AbortController();
    abort.abort(new Error("gone"));
    const state = reads("ready");
    await expect(pollUntil(state.read, () => true, { what: "x", signal: abort.signal })).rejects.toThrow("gone");
    expect(state.count()).toBe(0);
  });

  it("ends a real pause early when the signal aborts", async () => {
    const abort = new AbortController();
    const pending = pollUntil(
      async () => "pending",
      () => false,
      { what: "x", intervalMs: 3_600_000, signal: abort.signal },
    );
    abort.abort(new Error("stop"));
    await expect(pending).rejects.toThrow("stop");
  });

  it("ends the wait with a read's own error (retrying reads is the vendor call's job)", async () => {
    const clock = manualClock();
    const boom = new Error("403 forbidden");
    await expect(
      pollUntil(
        () => Promise.reject(boom),
        () => true,
        { what: "x", ...clock },
      ),
    ).rejects.toBe(boom);
    expect(clock.pauses).toEqual([]);
  });

  it("refuses intervals and deadlines that are not positive", async () => {
    const ok = async () => 1;
    await expect(pollUntil(ok, () => true, { what: "x", intervalMs: 0 })).rejects.toThrow("poll intervalMs: expected a positive number of milliseconds, got 0");
    await expect(pollUntil(ok, () => true, { what: "x", timeoutMs: -1 })).rejects.toThrow("poll timeoutMs");
    await expect(pollUntil(ok, () => true, { what: "x", factor: 0.5 })).rejects.toThrow("poll factor: expected a number >= 1, got 0.5");
  });
});
