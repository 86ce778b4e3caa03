import { describe, expect, it } from "vitest";
import { probeResult, summarizeProbe, type ProbeFinding } from "./index.js";

const info: ProbeFinding = { severity: "info", code: "TOOL_OK", message: "sh works" };
const limits: ProbeFinding = {
  severity: "warning",
  code: "LIMITS_NOT_ENFORCED",
  message: "not enforced: memoryMb, pids — cannot create cgroups under /sys/fs/cgroup/memory (not writable by uid 65534). Run the worker where…",
  brief: "limits NOT enforced: memoryMb, pids (the worker cannot create cgroups)",
};
const disk: ProbeFinding = { severity: "warning", code: "DISK", message: "diskMb is not enforced" };
const missing: ProbeFinding = { severity: "error", code: "ROOTFS_MISSING", message: "rootfs /nope is not a directory" };

describe("summarizeProbe", () => {
  it("says ready when nothing is wrong, and leaves info out", () => {
    expect(summarizeProbe("bubblewrap sandbox", [info])).toBe("bubblewrap sandbox ready");
    expect(summarizeProbe("bubblewrap sandbox", [])).toBe("bubblewrap sandbox ready");
  });

  it("carries every warning in words (the brief, else the message)", () => {
    expect(summarizeProbe("bubblewrap sandbox", [info, limits, disk])).toBe(
      "bubblewrap sandbox ready — limits NOT enforced: memoryMb, pids (the worker cannot create cgroups); diskMb is not enforced",
    );
  });

  it("puts errors first when not usable", () => {
    expect(summarizeProbe("x", [limits, missing])).toBe("x not usable — rootfs /nope is not a directory; limits NOT enforced: memoryMb, pids (the worker cannot create cgroups)");
  });
});

describe("probeResult", () => {
  it("is ok unless an error was found, and keeps each diagnostic with its code for the API (brief dropped)", () => {
    const ok = probeResult("x", [info, limits]);
    expect(ok.ok).toBe(true);
    expect(ok.summary).toMatch(/^x ready — limits NOT enforced/);
    expect(ok.diagnostics).toEqual([info, { severity: "warning", code: "LIMITS_NOT_ENFORCED", message: limits.message }]);
    const bad = probeResult("x", [missing]);
    expect(bad).toEqual({ ok: false, summary: "x not usable — rootfs /nope is not a directory", diagnostics: [missing] });
  });
});
