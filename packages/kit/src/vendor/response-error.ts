import type { Redactor } from "../redact/index.js";
import { ProviderApiError } from "./api-error.js";
import { isGoneStatus, isNotFoundCode, isRetryableStatus } from "./classify.js";
import { defaultErrorExtractor, type VendorErrorExtractor, type VendorErrorFields } from "./error-extract.js";
import { parseRetryAfter } from "./retry-after.js";
import { vendorText } from "./vendor-text.js";

export interface ResponseErrorInput {
  vendor: string;
  operation: string;
  status: number;
  headers: Headers;
  /** The (possibly truncated) body bytes; empty when the vendor sent none. */
  body: Uint8Array;
  redact: Redactor;
  extractError?: VendorErrorExtractor;
  /** When the response arrived, for an HTTP-date `Retry-After`. */
  now?: number;
}

/** Turns a non-2xx response into a `ProviderApiError`; an empty or non-JSON body is still an error. */
export function apiErrorFromResponse(input: ResponseErrorInput): ProviderApiError {
  const text = Buffer.from(input.body.buffer, input.body.byteOffset, input.body.byteLength).toString("utf8");
  let json: unknown;
  if (text.trim() !== "") {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  const body = { status: input.status, headers: input.headers, text, json };
  let fields: VendorErrorFields;
  try {
    fields = (input.extractError ?? defaultErrorExtractor)(body);
  } catch {
    fields = defaultErrorExtractor(body); // a provider's extractor must not hide the vendor's error
  }
  const html = /html/i.test(input.headers.get("content-type") ?? "");
  const rawMessage = fields.message ?? (text.trim() === "" ? "(empty body)" : json === undefined ? (html ? text.replace(/<[^>]*>/g, " ") : text) : "");
  const code = sanitizeCode(fields.code === undefined ? undefined : input.redact(fields.code)) ?? `http_${input.status}`;
  return new ProviderApiError({
    vendor: input.vendor,
    operation: input.operation,
    status: input.status,
    code,
    detail: vendorText(rawMessage, input.redact),
    retryable: fields.retryable ?? isRetryableStatus(input.status),
    gone: fields.gone ?? (isGoneStatus(input.status) || isNotFoundCode(fields.code)),
    mayHaveTakenEffect: fields.notProcessed !== true,
    requestId: fields.requestId === undefined ? undefined : vendorText(fields.requestId, input.redact, 128),
    retryAfterMs: parseRetryAfter(input.headers.get("retry-after"), input.now),
  });
}

/** Codes go into messages and `switch`es: keep them short and plain. */
function sanitizeCode(code: string | undefined): string | undefined {
  if (code === undefined) return undefined;
  const clean = code.replace(/[^A-Za-z0-9_.:-]/g, "_").slice(0, 64);
  return clean === "" ? undefined : clean;
}
