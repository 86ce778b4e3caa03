import { describe, expect, it } from "vitest";
import { hostTimeoutFor } from "./timeouts.js";

describe("hostTimeoutFor", () => {
  it("gives execute and lease calls their requested timeout plus 30 s", () => {
    expect(hostTimeoutFor("environmentExecute", { timeoutMs: 1_500, config: { timeoutMs: 99 } })).toBe(31_500);
    expect(hostTimeoutFor("environmentAcquireLease", { config: { timeoutMs: 300_000 } })).toBe(330_000);
    expect(hostTimeoutFor("environmentReleaseLease", { config: {} })).toBe(30_000);
  });

  it("gives probes 120 s and everything else 30 s", () => {
    expect(hostTimeoutFor("environmentProbe", { config: { timeoutMs: 5 } })).toBe(120_000);
    expect(hostTimeoutFor("environmentSyncIn", { timeoutMs: 5 })).toBe(30_000);
    expect(hostTimeoutFor("environmentValidateConfig", { config: { timeoutMs: 5 } })).toBe(30_000);
  });
});
