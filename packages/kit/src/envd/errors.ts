import { ProviderApiError, isProviderApiError } from "../vendor/api-error.js";
import { isRetryableStatus } from "../vendor/classify.js";
import { parseRetryAfter } from "../vendor/retry-after.js";
import { withRetry, type RetryPolicy } from "../vendor/retry.js";
import { vendorText } from "../vendor/vendor-text.js";

/** Connect's numeric codes (connectrpc `Code`), as the SDK's ConnectError carries them. */
const CONNECT_CODE_NAMES: Record<number, string> = {
  1: "canceled",
  2: "unknown",
  3: "invalid_argument",
  4: "deadline_exceeded",
  5: "not_found",
  6: "already_exists",
  7: "permission_denied",
  8: "resource_exhausted",
  9: "failed_precondition",
  10: "aborted",
  11: "out_of_range",
  12: "unimplemented",
  13: "internal",
  14: "unavailable",
  15: "data_loss",
  16: "unauthenticated",
};
/** The HTTP status the Connect protocol pairs with each code. */
const CONNECT_CODE_STATUS: Record<string, number> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
};

/** The code a provider's `notRunning` recognises: envd answered that the sandbox is not running (paused, or gone). */
export const SANDBOX_NOT_RUNNING = "sandbox_not_running";

export interface EnvdErrorContext {
  /** For control-plane calls: a not-found answer means the sandbox is gone. */
  notFoundMeansGone?: boolean;
  /** A process start that failed before the start event: nothing ran. */
  beforeStart?: boolean;
}

interface ConnectErrorLike {
  name: string;
  code: number;
  rawMessage?: string;
  message: string;
  metadata?: { get(name: string): string | null };
  cause?: unknown;
}

function isConnectErrorLike(error: unknown): error is ConnectErrorLike {
  return typeof error === "object" && error !== null && (error as { name?: unknown }).name === "ConnectError" && typeof (error as { code?: unknown }).code === "number";
}

/**
 * An E2B-family SDK failure as the kit's `ProviderApiError`: the SDK's typed errors (by name, so
 * either SDK's classes match), its `"<status>: <message>"` errors, the envd ConnectErrors of the raw
 * process client, and fetch failures. Quota and busy answers are marked as not processed, so even a
 * create is retried after them.
 */
export function envdApiError(vendor: string, operation: string, error: unknown, context: EnvdErrorContext = {}): ProviderApiError {
  if (isProviderApiError(error)) return error;
  const make = (status: number, code: string, detail: string, flags: { retryable?: boolean; gone?: boolean; mayHaveTakenEffect?: boolean; retryAfterMs?: number } = {}) =>
    new ProviderApiError({
      vendor,
      operation,
      status,
      code,
      detail: vendorText(detail, (text) => text),
      retryable: flags.retryable ?? isRetryableStatus(status),
      gone: flags.gone ?? false,
      mayHaveTakenEffect: flags.mayHaveTakenEffect ?? true,
      ...(flags.retryAfterMs !== undefined ? { retryAfterMs: flags.retryAfterMs } : {}),
    });

  if (isConnectErrorLike(error)) {
    const name = CONNECT_CODE_NAMES[error.code] ?? "unknown";
    const detail = error.rawMessage ?? error.message;
    const transport = transportCode(error.cause);
    if (transport) return make(0, transport, detail, { retryable: true, mayHaveTakenEffect: !context.beforeStart || transport !== "connect_failed" });
    const status = CONNECT_CODE_STATUS[name] ?? 500;
    const retryAfter = error.metadata?.get("retry-after");
    const retryAfterMs = retryAfter ? parseRetryAfter(retryAfter) : undefined;
    const refused = name === "resource_exhausted" || name === "unavailable" || name === "unauthenticated" || name === "permission_denied";
    const notRunning = context.beforeStart === true && name === "unavailable";
    return make(status, notRunning ? SANDBOX_NOT_RUNNING : name, detail, {
      retryable: name === "resource_exhausted" || (name === "unavailable" && !notRunning) || name === "unknown",
      mayHaveTakenEffect: !(context.beforeStart && refused),
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
  }

  const err = error instanceof Error ? error : new Error(String(error));
  const message = err.message;
  switch (err.name) {
    case "SandboxNotFoundError":
      return make(404, "not_found", message, { gone: true, retryable: false });
    case "NotFoundError":
    case "FileNotFoundError":
      return make(404, "not_found", message, { gone: context.notFoundMeansGone === true, retryable: false });
    case "AuthenticationError":
      return make(401, "unauthenticated", message, { retryable: false, mayHaveTakenEffect: false });
    case "RateLimitError":
      return make(429, "rate_limited", message, { retryable: true, mayHaveTakenEffect: false });
    case "ServiceBusyError":
      return make(503, "service_busy", message, { retryable: true, mayHaveTakenEffect: false });
    case "InvalidArgumentError":
      return make(400, "invalid_argument", message, { retryable: false });
    case "TemplateError":
      return make(400, "template", message, { retryable: false });
    case "NotEnoughSpaceError":
      return make(507, "not_enough_space", message, { retryable: false });
  }
  const transport = transportCode((err as { cause?: unknown }).cause) ?? transportCode(err);
  if (transport) return make(0, transport, message, { retryable: true, mayHaveTakenEffect: transport !== "connect_failed" });
  if (err.name === "TimeoutError" || err.name === "AbortError") return make(0, err.name === "AbortError" ? "aborted" : "timeout", message, { retryable: err.name === "TimeoutError" });
  const statusCode = (err as { statusCode?: unknown }).statusCode;
  const prefixed = /^(\d{3}): /.exec(message);
  const status = typeof statusCode === "number" ? statusCode : prefixed ? Number(prefixed[1]) : 0;
  if (status === 404) return make(404, "not_found", message, { gone: context.notFoundMeansGone === true, retryable: false });
  if (status === 429 || status === 503) return make(status, status === 429 ? "rate_limited" : "service_busy", message, { retryable: true, mayHaveTakenEffect: false });
  return make(status, status ? `http_${status}` : "unknown", message, { retryable: status ? isRetryableStatus(status) : false });
}

function transportCode(cause: unknown): string | undefined {
  const code = (cause as { code?: unknown } | undefined)?.code;
  if (typeof code !== "string") return undefined;
  if (code === "ECONNREFUSED") return "connect_failed";
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE") return "connection_reset";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "dns_not_found";
  if (code === "UND_ERR_CONNECT_TIMEOUT" || code === "ETIMEDOUT") return "timeout";
  return undefined;
}

export interface EnvdCallOptions extends EnvdErrorContext, RetryPolicy {
  vendor: string;
  operation: string;
  /** Repeating the call is harmless (get, kill, set timeout, connect, list). */
  idempotent: boolean;
  signal?: AbortSignal;
}

/** One SDK call, its failure as a `ProviderApiError`, retried as `withRetry` allows. */
export function envdCall<T>(options: EnvdCallOptions, call: () => Promise<T>): Promise<T> {
  return withRetry(
    async () => {
      try {
        return await call();
      } catch (error) {
        throw envdApiError(options.vendor, options.operation, error, options);
      }
    },
    {
      attempts: options.attempts ?? 4,
      totalMs: options.totalMs ?? 30_000,
      ...(options.baseDelayMs !== undefined ? { baseDelayMs: options.baseDelayMs } : {}),
      ...(options.maxDelayMs !== undefined ? { maxDelayMs: options.maxDelayMs } : {}),
      idempotent: options.idempotent,
      ...(options.signal ? { signal: options.signal } : {}),
    },
  );
}
