import { describe, expect, it } from "vitest";
import { checkTimeScale, createManualClock, createVendorClock } from "./clock.js";

describe("vendor clocks", () => {
  it("timeScale is vendor milliseconds per real millisecond: 100 makes a 300 s timeout last 3 s", () => {
    const clock = createVendorClock({ timeScale: 100 });
    expect(clock.duration(300_000)).toBe(3_000);
    expect(createVendorClock().duration(300_000)).toBe(300_000);
    expect(() => checkTimeScale(0)).toThrow("timeScale: must be a positive number of vendor milliseconds per real millisecond (got 0)");
    expect(() => checkTimeScale(Number.NaN, "options.timeScale")).toThrow(/^options\.timeScale: must be/);
  });

  it("a real clock fires a timer once its vendor duration has passed (lower bound only)", async () => {
    const clock = createVendorClock({ timeScale: 10 });
    const started = Date.now();
    await clock.sleep(500);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it("a manual clock fires only when advanced, in order, each timer's follow-up before the next", async () => {
    const clock = createManualClock({ start: 1_000, timeScale: 2 });
    const fired: string[] = [];
    clock.after(10_000, () => fired.push(`b@${clock.now()}`)); // 5,000 time-line ms
    clock.at(3_000, () => {
      fired.push(`a@${clock.now()}`);
      clock.after(2_000, () => fired.push(`a2@${clock.now()}`)); // armed by a timer: 1,000 ms later
    });
    const cancelled = clock.after(1_000, () => fired.push("never"));
    cancelled();
    await clock.advance(1_999);
    expect(fired).toEqual([]);
    await clock.advance(1);
    expect(fired).toEqual(["a@3000"]);
    await clock.advanceTo(10_000);
    expect(fired).toEqual(["a@3000", "a2@4000", "b@6000"]);
    expect(clock.now()).toBe(10_000);
    expect(clock.pending()).toBe(0);
  });

  it("a manual clock's sleep ends when advanced or aborted, and its real deadline is the time left from real now", async () => {
    const clock = createManualClock({ start: 0 });
    let woke = false;
    const sleeping = clock.sleep(100).then(() => (woke = true));
    await clock.advance(99);
    expect(woke).toBe(false);
    await clock.advance(1);
    await sleeping;
    expect(woke).toBe(true);
    const abort = new AbortController();
    const aborted = clock.sleep(1_000, abort.signal);
    abort.abort();
    await aborted;
    expect(clock.pending()).toBe(0);
    const before = Date.now();
    expect(clock.realDeadline(5_000)).toBeGreaterThanOrEqual(before + 4_900); // now() is 100
  });
});
