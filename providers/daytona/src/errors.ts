import { DaytonaConnectionTimeoutError, DaytonaError } from "@daytonaio/sdk";
import { API_KEY_ENV } from "./config.js";
import { isGoneStatus, isProviderApiError, isRetryableStatus, parseRetryAfter, ProviderApiError, vendorText, type Redactor } from "@paperclip-sandbox/kit";

export interface TranslateOptions {
  /** Statuses that mean the request was refused before it ran (safe to repeat a non-idempotent call). */
  notProcessed?: readonly number[];
}

const CONNECT_PHASE = /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|EADDRNOTAVAIL/;
const QUOTA = /limit exceeded|quota|exceeds maximum allowed/i;
/** The toolbox proxy's header naming a sandbox state it could not reach the daemon in. */
const STATE_HEADER = "x-daytona-sandbox-state";

/**
 * One `ProviderApiError` for whatever the SDK threw, with the message redacted. 401 and quota
 * errors say what to do about them; a toolbox call refused because the sandbox is not started
 * gets code `sandbox_not_started` (the lifecycle layer then starts it and runs the command again).
 */
export function daytonaApiError(error: unknown, operation: string, redact: Redactor, options: TranslateOptions = {}): ProviderApiError {
  if (isProviderApiError(error)) return error;
  const message = vendorText(error instanceof Error ? error.message : String(error), redact);
  const base = { vendor: "daytona", operation, detail: message };
  if (!(error instanceof DaytonaError) || error.statusCode === undefined) {
    if (error instanceof DaytonaConnectionTimeoutError) return new ProviderApiError({ ...base, status: 0, code: "timeout", retryable: true, gone: false, mayHaveTakenEffect: true });
    if (error instanceof DaytonaError && error.name === "DaytonaConnectionError") {
      const beforeSending = CONNECT_PHASE.test(message);
      if (/ENOTFOUND/.test(message)) return new ProviderApiError({ ...base, status: 0, code: "dns_not_found", retryable: false, gone: false, mayHaveTakenEffect: false });
      return new ProviderApiError({ ...base, status: 0, code: beforeSending ? "connect_failed" : "connection_reset", retryable: true, gone: false, mayHaveTakenEffect: !beforeSending });
    }
    // A local SDK refusal (bad argument) or a state the SDK waited on and gave up (error, build failed).
    return new ProviderApiError({ ...base, status: 0, code: "daytona_error", retryable: false, gone: false, mayHaveTakenEffect: true });
  }
  const status = error.statusCode;
  if (status < 300) {
    // The answer started (2xx) and was then cut: whatever was asked may have happened.
    return new ProviderApiError({ ...base, status: 0, code: "connection_reset", retryable: true, gone: false, mayHaveTakenEffect: true });
  }
  const header = (name: string) => headerOf(error.headers, name);
  const state = header(STATE_HEADER);
  const fromDaemon = error.source === "DAYTONA_DAEMON";
  let code = sanitize(error.code) ?? `http_${status}`;
  let detail = message;
  let retryable = isRetryableStatus(status);
  if (state !== undefined && state !== "started") {
    code = "sandbox_not_started";
    detail = `the sandbox is ${state}: ${message}`;
    retryable = false;
  } else if (status === 401) {
    code = "unauthorized";
    detail = `Daytona rejected the API key (HTTP 401: ${message}); check the API key field or ${API_KEY_ENV}`;
  } else if ((status === 400 || status === 403 || status === 429) && QUOTA.test(message)) {
    code = "quota_exceeded";
    detail = `Daytona quota exceeded: ${message} Stop or delete sandboxes (a stopped sandbox still holds its disk quota until archived) or raise the organization's limits.`;
    retryable = false;
  }
  return new ProviderApiError({
    ...base,
    status,
    code,
    detail,
    retryable,
    gone: isGoneStatus(status) && !fromDaemon,
    mayHaveTakenEffect: !(status === 429 || options.notProcessed?.includes(status)),
    ...optional("requestId", header("x-request-id")),
    ...optional("retryAfterMs", parseRetryAfter(header("retry-after") ?? null)),
  });
}

function headerOf(headers: unknown, name: string): string | undefined {
  if (!headers || typeof headers !== "object") return undefined;
  const bag = headers as { get?: (key: string) => unknown } & Record<string, unknown>;
  const value = typeof bag.get === "function" ? bag.get(name) : (bag[name] ?? bag[name.toLowerCase()]);
  return typeof value === "string" && value !== "" ? value : undefined;
}

function sanitize(code: string | undefined): string | undefined {
  const clean = code?.replace(/[^A-Za-z0-9_.:-]/g, "_").slice(0, 64);
  return clean ? clean : undefined;
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, V>);
}
