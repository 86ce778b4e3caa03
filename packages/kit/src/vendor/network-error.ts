import type { Redactor } from "../redact/index.js";
import { ProviderApiError } from "./api-error.js";
import { vendorText } from "./vendor-text.js";

/** What a failure with no usable response means for the caller: its code and the two flags it acts on. */
export interface NetworkFailure {
  /** `connect_failed`, `dns_not_found`, `tls`, `connection_reset`, `timeout` or `network`. */
  code: string;
  retryable: boolean;
  /** False only when the request certainly never left: then even a non-idempotent call may be resent. */
  mayHaveTakenEffect: boolean;
}

/*
 * The one table every translator delegates to (fetch, the vendor SDKs' wrapped errors, the
 * Kubernetes exec socket). Decisions where the copies used to disagree:
 * - ETIMEDOUT (the kernel gave up on a connect or on an established connection; which one is not
 *   said) is a `timeout`, retryable, that may have taken effect: a non-idempotent call is not resent.
 *   Undici's header and body timeouts are the same thing.
 * - EHOSTUNREACH, ENETUNREACH, EADDRNOTAVAIL and EAI_AGAIN (a temporary resolver failure) fail before
 *   anything is sent: `connect_failed`, retryable, no effect.
 * - ENOTFOUND (the name does not exist) is `dns_not_found`, not retryable: trying again will not help.
 */
const CONNECT_FAILURES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);
const TIMEOUTS = new Set(["ETIMEDOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
const RESETS = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]);
/** Codes as SDKs print them in a message when they drop the error object (axios, ws). */
const CODE_IN_MESSAGE = /\b(ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|EAI_AGAIN|ENOTFOUND|ETIMEDOUT|ECONNRESET|EPIPE|ECONNABORTED)\b/;

function classifyCode(code: string): NetworkFailure | undefined {
  if (code === "ENOTFOUND") return { code: "dns_not_found", retryable: false, mayHaveTakenEffect: false };
  if (CONNECT_FAILURES.has(code)) return { code: "connect_failed", retryable: true, mayHaveTakenEffect: false };
  if (code.startsWith("ERR_TLS") || code.startsWith("CERT_") || /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return { code: "tls", retryable: false, mayHaveTakenEffect: false };
  if (TIMEOUTS.has(code)) return { code: "timeout", retryable: true, mayHaveTakenEffect: true };
  if (RESETS.has(code)) return { code: "connection_reset", retryable: true, mayHaveTakenEffect: true };
  return undefined;
}

/**
 * What a network-level failure means (the `code` on the error or its `cause` chain, else a code
 * named in its message, else undici's own wording); undefined for anything that is not one.
 */
export function classifyNetworkError(error: unknown): NetworkFailure | undefined {
  const code = causeCode(error);
  const byCode = code === undefined ? undefined : classifyCode(code);
  if (byCode) return byCode;
  const message = messagesOf(error);
  const named = CODE_IN_MESSAGE.exec(message)?.[1];
  if (named) return classifyCode(named);
  // undici's "fetch failed" with a cause we do not know: a network problem, maybe transient.
  if (error instanceof TypeError && error.message === "fetch failed") return { code: "network", retryable: true, mayHaveTakenEffect: true };
  // undici's body stream cut (`TypeError: terminated`) and its wordings without a code.
  if (error instanceof TypeError && /terminated|other side closed|socket hang up/i.test(message)) return { code: "connection_reset", retryable: true, mayHaveTakenEffect: true };
  return undefined;
}

export interface FailureInput {
  vendor: string;
  operation: string;
  /** What `fetch` (or the body read, or an SDK) threw. */
  error: unknown;
  /** Our per-call deadline fired. */
  timedOut?: boolean;
  /** The caller's signal fired. */
  aborted?: boolean;
  timeoutMs?: number;
  redact: Redactor;
}

/**
 * Turns a failure with no usable response (network, deadline, abort) into a `ProviderApiError` with
 * status 0; one that is none of these is `request_failed`, not retryable.
 */
export function apiErrorFromFailure(input: FailureInput): ProviderApiError {
  const cls: NetworkFailure = input.timedOut
    ? { code: "timeout", retryable: true, mayHaveTakenEffect: true }
    : input.aborted
      ? { code: "aborted", retryable: false, mayHaveTakenEffect: true }
      : (classifyNetworkError(input.error) ?? { code: "request_failed", retryable: false, mayHaveTakenEffect: true });
  let detail: string;
  if (input.timedOut) detail = `no response within ${input.timeoutMs ?? "?"} ms`;
  else if (input.aborted) detail = "the call was cancelled";
  else detail = vendorText(describeCause(input.error), input.redact);
  return new ProviderApiError({ vendor: input.vendor, operation: input.operation, status: 0, detail, gone: false, ...cls });
}

/** The first `code` on the error or its `cause` chain (undici nests the socket error). */
function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current && typeof current === "object"; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && code !== "") return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Every message of the cause chain, for codes an SDK only printed. */
function messagesOf(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current; depth += 1) {
    if (current instanceof Error) {
      parts.push(current.message);
      current = current.cause;
    } else {
      if (typeof current === "string") parts.push(current);
      break;
    }
  }
  return parts.join(": ");
}

/** "fetch failed: other side closed (UND_ERR_SOCKET)": messages of the chain, never the objects. */
function describeCause(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current; depth += 1) {
    if (current instanceof Error) {
      const code = (current as { code?: unknown }).code;
      parts.push(typeof code === "string" ? `${current.message} (${code})` : current.message);
      current = current.cause;
    } else {
      parts.push(String(current));
      break;
    }
  }
  return parts.join(": ") || "request failed";
}
