// Create and exec options: bad input gets an error naming the field and the rule.
import { describe, expect, it } from "vitest";
import { checkExecOptions, normalizeCreate } from "./options.js";

describe("create options", () => {
  it("normalizes a valid request", () => {
    const now = 1_000_000;
    expect(normalizeCreate({ id: "a", ttlMs: 500, egress: { allowFqdns: ["API.Example.com", "*.x.org"], allowCidrs: ["10.0.0.0/8"] }, labels: { k: "v" } }, now)).toMatchObject({
      id: "a",
      expiresAt: now + 500,
      egress: { allowFqdns: ["api.example.com", "*.x.org"], allowCidrs: ["10.0.0.0/8"] },
      labels: { k: "v" },
      env: {},
      limits: {},
      metadata: {},
      rootfs: null,
    });
  });

  it.each([
    [{ ttlMs: 0 }, /ttlMs must be a number of milliseconds/],
    [{ ttlMs: 10, env: { "BAD-NAME": "x" } }, /env name "BAD-NAME" must match/],
    [{ ttlMs: 10, env: { A: 1 } }, /env\.A must be a string/],
    [{ ttlMs: 10, limits: { memoryMb: 1.5 } }, /limits\.memoryMb must be an integer/],
    [{ ttlMs: 10, limits: { disk: 5 } }, /limits has unknown field disk/],
    [{ ttlMs: 10, egress: { allowFqdns: ["bad host!"], allowCidrs: [] } }, /egress\.allowFqdns entry "bad host!" must be a host name/],
    [{ ttlMs: 10, egress: { allowFqdns: [], allowCidrs: ["10.0.0.0/99"] } }, /egress\.allowCidrs entry "10\.0\.0\.0\/99" prefix must be 0-32/],
    [{ ttlMs: 10, labels: { k: 5 } }, /labels\.k must be a string/],
    [{ ttlMs: 10, metadata: { big: "x".repeat(70_000) } }, /metadata must be at most 65536 bytes/],
    [{ ttlMs: 10, rootfs: "relative" }, /rootfs must be an absolute host path/],
    [{ expiresAt: 5 }, /expiresAt must be in the future/],
  ])("refuses %j", (options, error) => {
    expect(() => normalizeCreate(options as never, 1_000_000)).toThrow(error);
  });
});

describe("exec options", () => {
  it.each([
    [{}, /exactly one of argv and script/],
    [{ argv: [] }, /argv must be a non-empty list/],
    [{ script: "a\0b" }, /script must be a string without NUL/],
    [{ script: "true", cwd: "tmp" }, /cwd must be an absolute/],
    [{ script: "true", timeoutMs: -1 }, /timeoutMs must be a positive number/],
    [{ script: "true", outputLimitBytes: 32 * 1024 * 1024 }, /outputLimitBytes must be an integer in \[1, 16777216\]/],
  ])("refuses %j", (options, error) => {
    expect(() => checkExecOptions(options as never)).toThrow(error);
  });
});
