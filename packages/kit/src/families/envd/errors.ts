import { ProviderApiError, isProviderApiError } from "../../vendor/api-error.js";
import { isRetryableStatus } from "../../vendor/classify.js";
import { apiErrorFromGrpcStatus } from "../../vendor/grpc-error.js";
import { classifyNetworkError } from "../../vendor/network-error.js";
import type { RetryPolicy } from "../../vendor/retry.js";
import { createVendorCall } from "../../vendor/vendor-call.js";
import { vendorText } from "../../vendor/vendor-text.js";

/** Connect codes envd answers before it does anything: a start refused with one never ran. */
const REFUSALS = new Set(["resource_exhausted", "unavailable", "unauthenticated", "permission_denied"]);

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
    const detail = error.rawMessage ?? error.message;
    const network = error.cause === undefined ? undefined : classifyNetworkError(error.cause);
    // Mid-stream (after the start event) even a refused reconnect may follow a process that ran.
    if (network) return make(0, network.code, detail, { retryable: network.retryable, mayHaveTakenEffect: network.mayHaveTakenEffect || !context.beforeStart });
    const status = apiErrorFromGrpcStatus({ vendor, operation, code: error.code, message: detail, redact: (text) => text, retryAfter: error.metadata?.get("retry-after") });
    const refused = REFUSALS.has(status.code);
    // envd's not_found is a process or a file; the sandbox is gone only where the caller says so.
    const gone = context.notFoundMeansGone === true && status.gone;
    // Unavailable before the start event: the sandbox is paused or gone (the lifecycle layer resumes it).
    if (context.beforeStart && status.code === "unavailable") return status.with({ code: SANDBOX_NOT_RUNNING, retryable: false, gone, mayHaveTakenEffect: false });
    return status.with({ gone, mayHaveTakenEffect: !(context.beforeStart && refused) });
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
  const network = classifyNetworkError(err);
  if (network) return make(0, network.code, message, network);
  if (err.name === "TimeoutError" || err.name === "AbortError") return make(0, err.name === "AbortError" ? "aborted" : "timeout", message, { retryable: err.name === "TimeoutError" });
  const statusCode = (err as { statusCode?: unknown }).statusCode;
  const prefixed = /^(\d{3}): /.exec(message);
  const status = typeof statusCode === "number" ? statusCode : prefixed ? Number(prefixed[1]) : 0;
  if (status === 404) return make(404, "not_found", message, { gone: context.notFoundMeansGone === true, retryable: false });
  if (status === 429 || status === 503) return make(status, status === 429 ? "rate_limited" : "service_busy", message, { retryable: true, mayHaveTakenEffect: false });
  return make(status, status ? `http_${status}` : "unknown", message, { retryable: status ? isRetryableStatus(status) : false });
}

export interface EnvdCallOptions extends EnvdErrorContext, RetryPolicy {
  vendor: string;
  operation: string;
  /** Repeating the call is harmless (get, kill, set timeout, connect, list). */
  idempotent: boolean;
  signal?: AbortSignal;
}

const envdVendorCall = createVendorCall<EnvdErrorContext & { vendor: string }>({
  translate: (error, operation, context) => envdApiError(context.vendor, operation, error, context),
  retry: { attempts: 4, totalMs: 30_000 },
});

/** One SDK call, its failure as a `ProviderApiError`, retried as `withRetry` allows. */
export function envdCall<T>(options: EnvdCallOptions, call: () => Promise<T>): Promise<T> {
  return envdVendorCall(options.operation, call, options);
}
