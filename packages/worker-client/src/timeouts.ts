/** Host defaults (see docs: host RPC timeouts). */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;
export const PROBE_TIMEOUT_MS = 120_000;
/** Added to a command's own timeout so the worker can report `timedOut` before the host gives up. */
export const EXECUTION_OVERHEAD_MS = 30_000;
export const DEFAULT_INIT_TIMEOUT_MS = 30_000;
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
export const SIGTERM_GRACE_MS = 5_000;
/** The host waits this long for a login terminal's close, then retires the worker. */
export const LOGIN_PTY_CLOSE_TIMEOUT_MS = 10_000;

const EXECUTION_BOUND_METHODS = new Set(["environmentExecute", "environmentAcquireLease", "environmentResumeLease", "environmentReleaseLease", "environmentDestroyLease"]);

/**
 * The timeout the host would apply to a call: execute and lease calls get the requested
 * `timeoutMs` (else the config's) plus the overhead buffer, probes 120 s, the rest 30 s.
 */
export function hostTimeoutFor(method: string, params: unknown): number {
  if (method === "environmentProbe") return PROBE_TIMEOUT_MS;
  if (method === "loginPtyClose") return LOGIN_PTY_CLOSE_TIMEOUT_MS;
  if (EXECUTION_BOUND_METHODS.has(method)) {
    const requested = readTimeout(params) ?? readTimeout(readField(params, "config"));
    if (requested !== undefined) return requested + EXECUTION_OVERHEAD_MS;
  }
  return DEFAULT_CALL_TIMEOUT_MS;
}

function readTimeout(value: unknown): number | undefined {
  const timeout = readField(value, "timeoutMs");
  return typeof timeout === "number" && Number.isFinite(timeout) && timeout > 0 ? timeout : undefined;
}

function readField(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}
