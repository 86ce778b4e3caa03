import { createRedactor, type Redactor } from "../redact/index.js";
import { isProviderApiError, ProviderApiError } from "./api-error.js";
import { separateCredentials, type HeadersInput } from "./credentials.js";
import { startDeadline, type CallDeadline } from "./deadline.js";
import type { VendorErrorExtractor } from "./error-extract.js";
import { apiErrorFromFailure } from "./network-error.js";
import { readBody } from "./read-body.js";
import { apiErrorFromResponse } from "./response-error.js";
import { vendorText } from "./vendor-text.js";

export const DEFAULT_VENDOR_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** An error body is read only this far: enough for any vendor message. */
const ERROR_BODY_BYTES = 64 * 1024;
const MAX_SAME_ORIGIN_REDIRECTS = 5;

/** One HTTP exchange with a vendor. */
export interface VendorRequest {
  /** Names the call in errors and logs (`createSandbox`). */
  operation: string;
  method?: string;
  url: string | URL;
  headers?: HeadersInput;
  /** A string or bytes, or a stream (sent once: a stream body is never retried). */
  body?: string | Uint8Array | ReadableStream<Uint8Array>;
  /** Serialised as the body, with `content-type: application/json`. */
  json?: unknown;
  /** This call's deadline, covering the response body too (default: the options', else 30 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** What stays the same across a vendor's calls. */
export interface VendorFetchOptions {
  vendor: string;
  /** Values to redact besides the credentials found in the request (URL, auth headers). */
  secrets?: Iterable<string>;
  extractError?: VendorErrorExtractor;
  timeoutMs?: number;
  /** A larger successful body is an error (`response_too_large`); default 64 MiB. */
  maxResponseBytes?: number;
  /** Defaults to the global fetch (undici). */
  fetch?: typeof globalThis.fetch;
  now?: () => number;
}

export interface VendorResponse {
  status: number;
  headers: Headers;
  body: Buffer;
  text(): string;
  /** The body parsed as JSON; undefined for an empty body (204); a `ProviderApiError` when it is not JSON. */
  json<T = unknown>(): T;
}

export interface VendorStreamResponse {
  status: number;
  headers: Headers;
  /** The deadline keeps running until it ends; a failure while reading errors it with a `ProviderApiError`. */
  body: ReadableStream<Uint8Array>;
}

/**
 * `fetch` with a deadline, the caller's AbortSignal, and errors that carry no credential: a
 * non-2xx response (empty and non-JSON bodies included) and every network failure become a
 * `ProviderApiError` built from redacted text. One attempt; `withRetry` adds the retries.
 */
export async function vendorFetch(request: VendorRequest, options: VendorFetchOptions): Promise<VendorResponse> {
  const call = await send(request, options);
  try {
    const { bytes, truncated } = await readBody(call.response.body, options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES);
    if (truncated) {
      throw call.error({ status: call.response.status, code: "response_too_large", detail: `the response is larger than ${options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES} bytes` });
    }
    const status = call.response.status;
    const headers = call.response.headers;
    return {
      status,
      headers,
      body: bytes,
      text: () => bytes.toString("utf8"),
      json: <T>() => {
        const text = bytes.toString("utf8");
        if (text.trim() === "") return undefined as T;
        try {
          return JSON.parse(text) as T;
        } catch {
          throw call.error({ status, code: "invalid_response", detail: `the response is not JSON: ${vendorText(text, call.redact, 120)}` });
        }
      },
    };
  } catch (error) {
    throw call.failure(error);
  } finally {
    call.deadline.clear();
  }
}

/** `vendorFetch` for large downloads: the body is handed over as a stream, still under the deadline. */
export async function vendorFetchStream(request: VendorRequest, options: VendorFetchOptions): Promise<VendorStreamResponse> {
  const call = await send(request, options);
  const source = call.response.body;
  if (!source) {
    call.deadline.clear();
    return { status: call.response.status, headers: call.response.headers, body: new ReadableStream({ start: (c) => c.close() }) };
  }
  const reader = source.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          call.deadline.clear();
          controller.close();
        } else controller.enqueue(value);
      } catch (error) {
        call.deadline.clear();
        controller.error(call.failure(error));
      }
    },
    async cancel(reason) {
      call.deadline.clear();
      await reader.cancel(reason).catch(() => undefined);
    },
  });
  return { status: call.response.status, headers: call.response.headers, body };
}

interface OpenCall {
  response: Response;
  deadline: CallDeadline;
  redact: Redactor;
  /** A failure (network, deadline, abort, or an already-built error) as a `ProviderApiError`. */
  failure(error: unknown): ProviderApiError;
  error(fields: { status: number; code: string; detail: string }): ProviderApiError;
}

/** Sends the request and checks the status; a non-2xx response is read (a little) and thrown. */
async function send(request: VendorRequest, options: VendorFetchOptions): Promise<OpenCall> {
  const base = { vendor: options.vendor, operation: request.operation };
  const invalid = (detail: string) => new ProviderApiError({ ...base, status: 0, code: "invalid_request", detail, retryable: false, gone: false, mayHaveTakenEffect: false });
  let separated: ReturnType<typeof separateCredentials>;
  try {
    separated = separateCredentials(request.url, request.headers);
  } catch {
    // URL and Headers errors quote the offending value, which may be the credential itself.
    throw invalid("the URL or a header is not valid (not shown: it may hold a credential)");
  }
  const { url, headers, secrets } = separated;
  const redact = createRedactor([...(options.secrets ?? []), ...secrets]);
  let body: VendorRequest["body"] = request.body;
  if (request.json !== undefined) {
    body = JSON.stringify(request.json);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
  }
  const timeoutMs = request.timeoutMs ?? options.timeoutMs ?? DEFAULT_VENDOR_TIMEOUT_MS;
  const deadline = startDeadline(timeoutMs, request.signal);
  const failure = (error: unknown): ProviderApiError =>
    isProviderApiError(error) ? error : apiErrorFromFailure({ ...base, error, timedOut: deadline.timedOut, aborted: deadline.aborted, timeoutMs, redact });
  const error = (fields: { status: number; code: string; detail: string }) =>
    new ProviderApiError({ ...base, ...fields, detail: vendorText(fields.detail, redact), retryable: false, gone: false, mayHaveTakenEffect: true });
  const method = (request.method ?? "GET").toUpperCase();
  const fetchImpl = options.fetch ?? globalThis.fetch;
  try {
    let target = url;
    for (let redirects = 0; ; redirects += 1) {
      const init: RequestInit & { duplex?: "half" } = { method, headers, body, signal: deadline.signal, redirect: "manual" };
      if (body instanceof ReadableStream) init.duplex = "half";
      const response = await fetchImpl(target, init);
      const next = sameOriginRedirect(response, target, method);
      if (next && redirects < MAX_SAME_ORIGIN_REDIRECTS) {
        await response.body?.cancel().catch(() => undefined);
        target = next;
        continue;
      }
      if (response.status >= 200 && response.status < 300) return { response, deadline, redact, failure, error };
      if (response.status >= 300 && response.status < 400) {
        await response.body?.cancel().catch(() => undefined);
        // Not followed: the request's credentials must not travel to another origin.
        throw error({ status: response.status, code: "redirect", detail: `redirected${next ? " too many times" : " to another origin or for a request with a body"}; not followed` });
      }
      const { bytes } = await readBody(response.body, ERROR_BODY_BYTES);
      throw apiErrorFromResponse({ ...base, status: response.status, headers: response.headers, body: bytes, redact, extractError: options.extractError, now: options.now?.() });
    }
  } catch (caught) {
    deadline.clear();
    throw failure(caught);
  }
}

/** Where a GET/HEAD redirect to the same origin points; undefined for anything we do not follow. */
function sameOriginRedirect(response: Response, from: URL, method: string): URL | undefined {
  if (![301, 302, 303, 307, 308].includes(response.status) || (method !== "GET" && method !== "HEAD")) return undefined;
  const location = response.headers.get("location");
  if (!location) return undefined;
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    return undefined;
  }
  return next.origin === from.origin ? next : undefined;
}
