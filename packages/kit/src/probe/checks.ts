import type { PluginEnvironmentDiagnostic } from "@paperclipai/plugin-sdk";
import { createRedactor, redactDeep, isSecretLookingKey, type Redactor } from "../redact/index.js";
import { isProviderApiError } from "../vendor/api-error.js";
import { vendorText } from "../vendor/vendor-text.js";

export const DEFAULT_PROBE_CHECK_TIMEOUT_MS = 10_000;

/** What a check found. Returning nothing means it passed. */
export interface ProbeCheckOutcome {
  ok: boolean;
  message?: string;
  /** For a failed check: "warning" does not fail the probe (default "error"). */
  severity?: "warning" | "error";
  details?: Record<string, unknown>;
}

export interface ProbeCheck {
  /** Stable, for the API: the diagnostic's `code` (`credential_present`, `endpoint_reachable`, `auth_accepted`, `quota`). */
  code: string;
  /** For people: "API key present". */
  name: string;
  timeoutMs?: number;
  /** Codes of checks that must have passed first; otherwise this one is skipped. */
  requires?: readonly string[];
  /** Gets a signal that fires on the check's deadline or the probe's cancellation. */
  run(ctx: { signal: AbortSignal }): Promise<ProbeCheckOutcome | void> | ProbeCheckOutcome | void;
}

export type ProbeCheckStatus = "passed" | "failed" | "warned" | "timed_out" | "threw" | "skipped";

export interface ProbeChecksResult {
  /** No check ended with an error. */
  ok: boolean;
  diagnostics: PluginEnvironmentDiagnostic[];
  /** Per check code, how it ended. */
  statuses: Record<string, ProbeCheckStatus>;
}

export interface ProbeChecksOptions {
  /** Values to redact (the config's credentials). */
  secrets?: Iterable<string>;
  /** A redactor to use instead (e.g. a vendor client's). */
  redact?: Redactor;
  /** Default per-check deadline (10 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Runs named checks in order, each under its own deadline, and turns each outcome (including a
 * throw or a hang) into a diagnostic `{severity, code, message, details}`: code = the check's
 * code, message and details redacted. A check that hangs is abandoned at its deadline.
 */
export async function runProbeChecks(checks: readonly ProbeCheck[], options: ProbeChecksOptions = {}): Promise<ProbeChecksResult> {
  const codes = new Set<string>();
  for (const check of checks) {
    if (!/^[a-z][a-z0-9_.-]*$/.test(check.code)) throw new TypeError(`probe check code: expected lowercase [a-z0-9_.-] starting with a letter, got ${JSON.stringify(check.code)}`);
    if (codes.has(check.code)) throw new TypeError(`probe check code ${JSON.stringify(check.code)} is used twice`);
    codes.add(check.code);
  }
  const redact = options.redact ?? createRedactor(options.secrets ?? []);
  const statuses: Record<string, ProbeCheckStatus> = {};
  const diagnostics: PluginEnvironmentDiagnostic[] = [];
  for (const check of checks) {
    const missing = (check.requires ?? []).filter((code) => statuses[code] !== "passed" && statuses[code] !== "warned");
    const started = Date.now();
    let status: ProbeCheckStatus;
    let diagnostic: Omit<PluginEnvironmentDiagnostic, "code">;
    if (missing.length > 0) {
      status = "skipped";
      diagnostic = { severity: "info", message: `${check.name}: not checked (needs ${missing.join(", ")})` };
    } else {
      ({ status, diagnostic } = await runOne(check, options.timeoutMs ?? DEFAULT_PROBE_CHECK_TIMEOUT_MS, options.signal, redact));
    }
    statuses[check.code] = status;
    diagnostics.push({
      ...diagnostic,
      code: check.code,
      details: { ...(diagnostic.details ?? {}), check: check.name, status, durationMs: Date.now() - started },
    });
  }
  return { ok: diagnostics.every((d) => d.severity !== "error"), diagnostics, statuses };
}

async function runOne(
  check: ProbeCheck,
  defaultTimeoutMs: number,
  outer: AbortSignal | undefined,
  redact: Redactor,
): Promise<{ status: ProbeCheckStatus; diagnostic: Omit<PluginEnvironmentDiagnostic, "code"> }> {
  const timeoutMs = check.timeoutMs ?? defaultTimeoutMs;
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) onAbort();
  else outer?.addEventListener("abort", onAbort, { once: true });
  const deadline = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error(`${check.code}: deadline passed`));
      resolve("timeout");
    }, timeoutMs);
  });
  const text = (raw: string) => vendorText(raw, redact);
  try {
    const outcome = await Promise.race([Promise.resolve().then(() => check.run({ signal: controller.signal })), deadline]);
    if (outcome === "timeout") {
      return { status: "timed_out", diagnostic: { severity: "error", message: `${check.name}: no answer within ${timeoutMs} ms` } };
    }
    const details = outcome?.details ? redactDeep(outcome.details, redact, { maskKey: isSecretLookingKey }) : undefined;
    if (!outcome || outcome.ok) {
      return { status: "passed", diagnostic: { severity: "info", message: text(outcome?.message ? `${check.name}: ${outcome.message}` : `${check.name}: ok`), details } };
    }
    const severity = outcome.severity ?? "error";
    return {
      status: severity === "warning" ? "warned" : "failed",
      diagnostic: { severity, message: text(`${check.name}: ${outcome.message ?? "failed"}`), details },
    };
  } catch (error) {
    const details = isProviderApiError(error) ? { vendor: error.vendor, operation: error.operation, httpStatus: error.status, vendorCode: error.code, retryable: error.retryable } : undefined;
    const message = error instanceof Error ? error.message : String(error);
    return { status: "threw", diagnostic: { severity: "error", message: text(`${check.name}: ${message}`), details } };
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener("abort", onAbort);
  }
}
