import { DaytonaConnectionError, DaytonaConnectionTimeoutError, DaytonaError } from "@daytonaio/sdk";
import { classifyNetworkError, isGoneStatus, isProviderApiError, isRetryableStatus, parseRetryAfter, ProviderApiError, vendorText, type Redactor } from "@paperclip-sandbox/kit";
import { API_KEY_ENV } from "./config.js";

export interface TranslateOptions {
  /** Statuses that mean the request was refused before it ran (so a non-idempotent call may be sent again). */
  notProcessed?: readonly number[];
}

const QUOTA = /limit exceeded|quota|exceeds maximum allowed/i;

/**
 * One `ProviderApiError` for whatever the SDK threw, redacted. A 401 and a quota refusal say what to
 * do; a toolbox call the proxy refused because the sandbox is not started (its state in
 * `X-Daytona-Sandbox-State`) gets code `sandbox_not_started`, which the lifecycle layer answers by
 * starting the sandbox and running the command once more.
 */
export function daytonaApiError(error: unknown, operation: string, redact: Redactor, options: TranslateOptions = {}): ProviderApiError {
  if (isProviderApiError(error)) return error;
  const detail = vendorText(error instanceof Error ? error.message : String(error), redact);
  const init = (status: number, code: string, retryable: boolean, mayHaveTakenEffect = true) =>
    new ProviderApiError({ vendor: "daytona", operation, status, code, detail, retryable, gone: false, mayHaveTakenEffect });
  if (error instanceof DaytonaConnectionTimeoutError) return init(0, "timeout", true);
  if (error instanceof DaytonaConnectionError) {
    // The SDK keeps only the message of the socket error: the kit's classifier reads its code there.
    const network = classifyNetworkError(error) ?? { code: "connection_reset", retryable: true, mayHaveTakenEffect: true };
    return init(0, network.code, network.retryable, network.mayHaveTakenEffect);
  }
  // No status: a local SDK refusal, or a state it waited for in vain (error, build failed).
  if (!(error instanceof DaytonaError) || error.statusCode === undefined) return init(0, "daytona_error", false);
  const status = error.statusCode;
  // A 2xx that was cut mid-answer: whatever was asked may have happened.
  if (status < 300) return init(0, "connection_reset", true);
  const header = (name: string) => headerOf(error.headers, name);
  const state = header("x-daytona-sandbox-state");
  let code = error.code?.replace(/[^A-Za-z0-9_.:-]/g, "_").slice(0, 64) || `http_${status}`;
  let message = detail;
  let retryable = isRetryableStatus(status);
  if (state !== undefined && state !== "started") [code, message, retryable] = ["sandbox_not_started", `the sandbox is ${state}: ${detail}`, false];
  else if (status === 401) [code, message] = ["unauthorized", `Daytona rejected the API key (HTTP 401: ${detail}); check the API key field or ${API_KEY_ENV}`];
  else if ([400, 403, 429].includes(status) && QUOTA.test(detail)) {
    [code, retryable] = ["quota_exceeded", false];
    message = `Daytona quota exceeded: ${detail} Stop or delete sandboxes (a stopped sandbox still holds its disk quota until archived) or raise the organization's limits.`;
  }
  const requestId = header("x-request-id");
  const retryAfterMs = parseRetryAfter(header("retry-after"));
  return new ProviderApiError({
    vendor: "daytona",
    operation,
    status,
    code,
    detail: message,
    retryable,
    gone: isGoneStatus(status) && error.source !== "DAYTONA_DAEMON", // a missing file is not a missing sandbox
    mayHaveTakenEffect: !(status === 429 || options.notProcessed?.includes(status)),
    ...(requestId === undefined ? {} : { requestId }),
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
}

function headerOf(headers: unknown, name: string): string | undefined {
  const bag = headers as { get?: (key: string) => unknown } | Record<string, unknown> | undefined;
  const value = typeof bag?.get === "function" ? bag.get(name) : (bag as Record<string, unknown> | undefined)?.[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}
