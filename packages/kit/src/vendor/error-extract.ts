/** A vendor's error response, as the extractor sees it. */
export interface VendorErrorBody {
  status: number;
  headers: Headers;
  /** The body as text (truncated to the first 64 KiB); "" when empty. */
  text: string;
  /** The body parsed as JSON, or undefined when it is empty or not JSON. */
  json: unknown;
}

/** What a vendor's error body says; anything left out is derived from the status. */
export interface VendorErrorFields {
  message?: string;
  code?: string;
  requestId?: string;
  /** Overrides the status-based "gone" (e.g. a 404 about a file inside a live sandbox is not). */
  gone?: boolean;
  /** Overrides the status-based "retryable" (e.g. a 429 that is a hard quota, not a rate limit). */
  retryable?: boolean;
  /** The vendor documents that it rejected the request before acting on it (a rate limiter's 429). */
  notProcessed?: boolean;
}

/** Reads message, code and request id out of one vendor's error body. */
export type VendorErrorExtractor = (body: VendorErrorBody) => VendorErrorFields;

const REQUEST_ID_HEADERS = ["x-request-id", "request-id", "x-amzn-requestid", "x-correlation-id", "cf-ray"];

const asString = (value: unknown): string | undefined => (typeof value === "string" && value.trim() !== "" ? value : undefined);
const record = (value: unknown): Record<string, unknown> | undefined => (value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined);

/** A request id from the usual response headers. */
export function requestIdFromHeaders(headers: Headers): string | undefined {
  for (const name of REQUEST_ID_HEADERS) {
    const value = headers.get(name);
    if (value) return value;
  }
  return undefined;
}

/**
 * The shapes the nine vendors use: `{message}` (daytona, e2b, coder), `{error: "code", message}`
 * (cloudflare), `{error: {code, message}}` (Connect), `{detail}`, `{errors: [{message}]}`,
 * Kubernetes `Status {reason, message}`, and `code`/`error_code` strings. A numeric `code` (e2b
 * echoes the status) is not a code.
 */
export function defaultErrorExtractor(body: VendorErrorBody): VendorErrorFields {
  const top = record(body.json);
  if (!top) return { requestId: requestIdFromHeaders(body.headers) };
  const nested = record(top.error);
  const firstError = Array.isArray(top.errors) ? record(top.errors[0]) : undefined;
  const message = asString(top.message) ?? asString(nested?.message) ?? asString(firstError?.message) ?? asString(top.detail) ?? asString(top.error_description) ?? asString(top.error);
  const code =
    asString(nested?.code) ??
    asString(top.code) ??
    asString(top.error_code) ??
    (top.kind === "Status" ? asString(top.reason) : undefined) ??
    (asString(top.error) && asString(top.message) ? asString(top.error) : undefined);
  const requestId = asString(top.requestId) ?? asString(top.request_id) ?? requestIdFromHeaders(body.headers);
  return { message, code, requestId };
}
