import type { Redactor } from "../redact/index.js";
import { ProviderApiError } from "./api-error.js";
import { vendorText } from "./vendor-text.js";

export interface FailureInput {
  vendor: string;
  operation: string;
  /** What `fetch` (or the body read) threw. */
  error: unknown;
  /** Our per-call deadline fired. */
  timedOut: boolean;
  /** The caller's signal fired. */
  aborted: boolean;
  timeoutMs?: number;
  redact: Redactor;
}

interface FailureClass {
  code: string;
  retryable: boolean;
  mayHaveTakenEffect: boolean;
}

// Before any byte of the request was sent: safe to retry even a non-idempotent call.
const CONNECT_FAILURES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);
const RESETS = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED", "ETIMEDOUT", "UND_ERR_SOCKET", "UND_ERR_CLOSED", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

/** Turns a failure with no usable response (network, deadline, abort) into a `ProviderApiError` with status 0. */
export function apiErrorFromFailure(input: FailureInput): ProviderApiError {
  const errorCode = causeCode(input.error);
  const cls = classify(input, errorCode);
  let detail: string;
  if (input.timedOut) detail = `no response within ${input.timeoutMs ?? "?"} ms`;
  else if (input.aborted) detail = "the call was cancelled";
  else detail = vendorText(describeCause(input.error), input.redact);
  return new ProviderApiError({ vendor: input.vendor, operation: input.operation, status: 0, detail, gone: false, ...cls });
}

function classify(input: FailureInput, errorCode: string | undefined): FailureClass {
  if (input.timedOut) return { code: "timeout", retryable: true, mayHaveTakenEffect: true };
  if (input.aborted) return { code: "aborted", retryable: false, mayHaveTakenEffect: true };
  if (errorCode === "ENOTFOUND") return { code: "dns_not_found", retryable: false, mayHaveTakenEffect: false };
  if (errorCode && CONNECT_FAILURES.has(errorCode)) return { code: "connect_failed", retryable: true, mayHaveTakenEffect: false };
  if (errorCode && (errorCode.startsWith("ERR_TLS") || errorCode.startsWith("CERT_") || /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(errorCode))) {
    return { code: "tls", retryable: false, mayHaveTakenEffect: false };
  }
  if (errorCode && RESETS.has(errorCode)) return { code: "connection_reset", retryable: true, mayHaveTakenEffect: true };
  // undici's "fetch failed" with a cause we do not know: a network problem, maybe transient.
  if (input.error instanceof TypeError && input.error.message === "fetch failed") return { code: "network", retryable: true, mayHaveTakenEffect: true };
  if (input.error instanceof Error && /terminated|other side closed|socket hang up/i.test(input.error.message)) {
    return { code: "connection_reset", retryable: true, mayHaveTakenEffect: true };
  }
  return { code: "request_failed", retryable: false, mayHaveTakenEffect: true };
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
