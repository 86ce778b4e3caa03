import { describe, expect, it } from "vitest";
import { ProviderApiError } from "../vendor/index.js";
import { runProbeChecks, type ProbeCheck } from "./index.js";

const KEY = "e2b_5d4c3b2a1f0e9d8c7b6a";

describe("runProbeChecks", () => {
  it("turns passes, failures, a throw and a hang into coded, redacted diagnostics", async () => {
    const checks: ProbeCheck[] = [
      { code: "credential_present", name: "API key present", run: () => ({ ok: true, message: "apiKey is set" }) },
      {
        code: "auth_accepted",
        name: "API key accepted",
        run: async () => {
          throw new ProviderApiError({
            vendor: "e2b",
            operation: "listSandboxes",
            status: 401,
            code: "unauthorized",
            detail: `key ${KEY} rejected`,
            retryable: false,
            gone: false,
            mayHaveTakenEffect: true,
          });
        },
      },
      { code: "endpoint_reachable", name: "API reachable", timeoutMs: 100, run: () => new Promise(() => undefined) },
      { code: "quota", name: "Sandbox quota", run: () => ({ ok: false, severity: "warning", message: "19 of 20 sandboxes in use", details: { used: 19, token: KEY } }) },
      { code: "template", name: "Template exists", requires: ["auth_accepted"], run: () => ({ ok: true }) },
    ];
    const started = Date.now();
    const result = await runProbeChecks(checks, { secrets: [KEY] });
    // A bound far from the alternative (a slow machine is not a failure): without its timeout the hanging check never ends.
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(result.ok).toBe(false);
    expect(result.statuses).toEqual({ credential_present: "passed", auth_accepted: "threw", endpoint_reachable: "timed_out", quota: "warned", template: "skipped" });
    expect(result.diagnostics.map((d) => [d.code, d.severity, d.message])).toEqual([
      ["credential_present", "info", "API key present: apiKey is set"],
      ["auth_accepted", "error", "API key accepted: e2b listSandboxes failed: HTTP 401 unauthorized: key [REDACTED] rejected"],
      ["endpoint_reachable", "error", "API reachable: no answer within 100 ms"],
      ["quota", "warning", "Sandbox quota: 19 of 20 sandboxes in use"],
      ["template", "info", "Template exists: not checked (needs auth_accepted)"],
    ]);
    expect(result.diagnostics[1]!.details).toMatchObject({ vendor: "e2b", httpStatus: 401, vendorCode: "unauthorized", status: "threw" });
    expect(result.diagnostics[3]!.details).toMatchObject({ used: 19, token: "[REDACTED]", check: "Sandbox quota" });
    expect(JSON.stringify(result)).not.toContain(KEY);
  });

  it("passes the check a signal that fires at its deadline", async () => {
    let aborted = false;
    await runProbeChecks([
      {
        code: "slow",
        name: "Slow",
        timeoutMs: 50,
        run: ({ signal }) =>
          new Promise((resolve) =>
            signal.addEventListener("abort", () => {
              aborted = true;
              resolve();
            }),
          ),
      },
    ]);
    expect(aborted).toBe(true);
  });

  it("is ok when only warnings and passes remain; a thrown plain error is redacted too", async () => {
    expect(
      (
        await runProbeChecks([
          { code: "a", name: "A", run: () => undefined },
          { code: "b", name: "B", run: () => ({ ok: false, severity: "warning" }) },
        ])
      ).ok,
    ).toBe(true);
    const thrown = await runProbeChecks(
      [
        {
          code: "c",
          name: "C",
          run: () => {
            throw new Error(`config has apiKey ${KEY}`);
          },
        },
      ],
      { secrets: [KEY] },
    );
    expect(thrown.diagnostics[0]!.message).toBe("C: config has apiKey [REDACTED]");
  });

  it("refuses unusable or repeated codes", async () => {
    await expect(runProbeChecks([{ code: "Bad Code", name: "x", run: () => undefined }])).rejects.toThrow(/probe check code/);
    await expect(
      runProbeChecks([
        { code: "a", name: "x", run: () => undefined },
        { code: "a", name: "y", run: () => undefined },
      ]),
    ).rejects.toThrow(/used twice/);
  });
});
