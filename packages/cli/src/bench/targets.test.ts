import { rmSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_TARGETS, loadTargets } from "./targets.js";

describe("targets", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "pcs-targets-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("has the frozen SLO defaults", () => {
    expect(DEFAULT_TARGETS.warmAcquire).toEqual({ p50Ms: 1500, p95Ms: 3000, minSuccessRate: 0.98 });
    expect(DEFAULT_TARGETS.coldAcquire).toEqual({ p50Ms: 20000, p95Ms: 45000, minSuccessRate: 0.98 });
    expect(DEFAULT_TARGETS.coldFirstCommand).toEqual({ p50Ms: 15000, minSuccessRate: 0.99 });
    expect(DEFAULT_TARGETS.steadyCommand).toEqual({ p50Ms: 1000, p95Ms: 2000, minSuccessRate: 0.99 });
    expect(DEFAULT_TARGETS.cleanup).toEqual({ p50Ms: 5000, p95Ms: 15000 });
    expect(Object.isFrozen(DEFAULT_TARGETS.warmAcquire)).toBe(true);
  });

  it("merges a targets file over the defaults without changing them", () => {
    const file = path.join(dir, "t.yaml");
    writeFileSync(file, "steadyCommand:\n  p50Ms: 5\n  p95Ms: null\n");
    const targets = loadTargets(file);
    expect(targets.steadyCommand).toEqual({ p50Ms: 5, minSuccessRate: 0.99 });
    expect(DEFAULT_TARGETS.steadyCommand.p50Ms).toBe(1000);
  });

  it("rejects unknown metrics and bad values", () => {
    const bad = path.join(dir, "bad.json");
    writeFileSync(bad, '{"coldStart": {"p50Ms": 1}}');
    expect(() => loadTargets(bad)).toThrow(/unknown metric 'coldStart'/);
    writeFileSync(bad, '{"cleanup": {"minSuccessRate": 2}}');
    expect(() => loadTargets(bad)).toThrow(/number from 0 to 1/);
  });
});
