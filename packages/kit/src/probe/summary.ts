import type { PluginEnvironmentDiagnostic, PluginEnvironmentProbeResult } from "@paperclipai/plugin-sdk";

/** A diagnostic, plus the few words it adds to the probe's summary (its message when absent). */
export interface ProbeFinding extends PluginEnvironmentDiagnostic {
  brief?: string;
}

/**
 * The one line the host shows for a probe (its form and its toast show `summary` only, never the
 * diagnostics): "<subject> ready" or "<subject> not usable", then every error and warning in words,
 * e.g. "bubblewrap sandbox ready — limits NOT enforced: memoryMb, pids (the worker cannot create cgroups)".
 */
export function summarizeProbe(subject: string, findings: readonly ProbeFinding[]): string {
  const errors = findings.filter((f) => f.severity === "error");
  const warnings = findings.filter((f) => f.severity === "warning");
  const words = [...errors, ...warnings].map((f) => (f.brief ?? f.message).trim()).filter(Boolean);
  const state = `${subject} ${errors.length > 0 ? "not usable" : "ready"}`;
  return words.length > 0 ? `${state} — ${words.join("; ")}` : state;
}

/** The probe's result: ok unless an error was found, the summary above, and each diagnostic with its code. */
export function probeResult(subject: string, findings: readonly ProbeFinding[]): PluginEnvironmentProbeResult {
  return {
    ok: !findings.some((f) => f.severity === "error"),
    summary: summarizeProbe(subject, findings),
    diagnostics: findings.map(({ brief: _brief, ...diagnostic }) => diagnostic),
  };
}
