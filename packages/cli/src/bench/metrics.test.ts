import { describe, expect, it } from "vitest";
import { overallVerdict, percentile, summarize, verdictExitCode, type Sample } from "./metrics.js";
import { kubernetesFallback } from "./report.js";
import { DEFAULT_TARGETS } from "./targets.js";

const ok = (i: number, ms: number): Sample => ({ i, ms, outcome: "ok" });
const failed = (i: number): Sample => ({ i, ms: null, outcome: "failed", note: "boom" });
const unverifiable = (i: number): Sample => ({ i, ms: null, outcome: "unverifiable", note: "printed nothing" });

describe("bench metrics", () => {
  it("uses nearest-rank percentiles", () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(values, 50)).toBe(50);
    expect(percentile(values, 95)).toBe(95);
    expect(percentile([7], 95)).toBe(7);
    expect(percentile([], 50)).toBeNull();
  });

  it("passes only when every target holds and every sample was measurable", () => {
    const samples = Array.from({ length: 100 }, (_, i) => ok(i + 1, 100 + i));
    expect(summarize(samples, DEFAULT_TARGETS.steadyCommand).verdict).toBe("PASS");
  });

  it("fails on a p95 breach or a low success rate", () => {
    const slow = Array.from({ length: 100 }, (_, i) => ok(i + 1, i < 90 ? 100 : 5_000));
    const s = summarize(slow, DEFAULT_TARGETS.steadyCommand);
    expect(s.verdict).toBe("FAIL");
    expect(s.reasons.join()).toMatch(/p95 5000 ms > 2000 ms/);
    const flaky = [...Array.from({ length: 97 }, (_, i) => ok(i + 1, 10)), failed(98), failed(99), failed(100)];
    expect(summarize(flaky, DEFAULT_TARGETS.warmAcquire).verdict).toBe("FAIL");
  });

  it("is UNVERIFIED, never PASS, when a sample could not be measured", () => {
    const samples = [...Array.from({ length: 99 }, (_, i) => ok(i + 1, 10)), unverifiable(100)];
    const s = summarize(samples, DEFAULT_TARGETS.coldFirstCommand);
    expect(s.verdict).toBe("UNVERIFIED");
    expect(s.reasons[0]).toMatch(/1 of 100 samples unverifiable: printed nothing/);
    expect(summarize([unverifiable(1)], DEFAULT_TARGETS.warmAcquire).verdict).toBe("UNVERIFIED");
    expect(summarize([], DEFAULT_TARGETS.warmAcquire).verdict).toBe("UNVERIFIED");
  });

  it("combines verdicts and maps them to exit codes", () => {
    expect(overallVerdict(["PASS", "UNVERIFIED", "FAIL"])).toBe("FAIL");
    expect(overallVerdict(["PASS", "UNVERIFIED"])).toBe("UNVERIFIED");
    expect(overallVerdict(["PASS", "PASS"])).toBe("PASS");
    expect([verdictExitCode("PASS"), verdictExitCode("FAIL"), verdictExitCode("UNVERIFIED")]).toEqual([0, 1, 2]);
  });

  it("recommends the Kubernetes fallback after two consecutive cold failures or a cold p95 breach", () => {
    const target = DEFAULT_TARGETS.coldAcquire;
    const twoInARow = [ok(1, 10), failed(2), failed(3), ok(4, 10)];
    expect(kubernetesFallback(twoInARow, summarize(twoInARow, target), target).recommended).toBe(true);
    const apart = [failed(1), ok(2, 10), failed(3), ok(4, 10)];
    expect(kubernetesFallback(apart, summarize(apart, target), target).recommended).toBe(false);
    const slow = Array.from({ length: 20 }, (_, i) => ok(i + 1, i < 18 ? 1_000 : 60_000));
    const rec = kubernetesFallback(slow, summarize(slow, target), target);
    expect(rec.recommended).toBe(true);
    expect(rec.reasons[0]).toMatch(/p95/);
  });
});
