import { createRedactor, type Redactor } from "../redact/index.js";
import { separateCredentials } from "./credentials.js";
import type { VendorErrorExtractor } from "./error-extract.js";
import { DEFAULT_VENDOR_TIMEOUT_MS, vendorFetch, vendorFetchStream, type VendorFetchOptions, type VendorRequest, type VendorResponse, type VendorStreamResponse } from "./http.js";
import { type RetryEvent, type RetryPolicy } from "./retry.js";
import { readEventStream, type ServerSentEvent } from "./sse.js";
import { createVendorCall } from "./vendor-call.js";

export interface VendorClientOptions {
  vendor: string;
  /** The API root; request paths are appended to its path (`https://app.daytona.io/api`). */
  baseUrl: string | URL;
  /** Sent with every call (auth included); credential values in them are redacted everywhere. */
  headers?: Record<string, string>;
  /** More values to redact (a token sent in a body, a minted session secret). */
  secrets?: Iterable<string>;
  /** Per-call deadline (default 30 s); each attempt gets its own, bounded by the retry budget. */
  timeoutMs?: number;
  /** Retry budget for idempotent calls (and for failures that certainly had no effect); `false` turns retries off. */
  retry?: RetryPolicy | false;
  onRetry?: (event: RetryEvent & { operation: string }) => void;
  extractError?: VendorErrorExtractor;
  maxResponseBytes?: number;
  fetch?: typeof globalThis.fetch;
  /** Injected for tests: the backoff's randomness. */
  random?: () => number;
}

export interface VendorClientRequest {
  operation: string;
  method?: string;
  /** Appended to the base URL. An array is a list of path segments, each percent-encoded (`["sandbox", id]`). */
  path: string | readonly string[];
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  body?: VendorRequest["body"];
  json?: unknown;
  /** Required: whether repeating this call is harmless. A call that is not is retried only when it certainly did not reach the vendor. */
  idempotent: boolean;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface VendorClient {
  readonly vendor: string;
  request(request: VendorClientRequest): Promise<VendorResponse>;
  /** `request`, then the body parsed as JSON. */
  json<T = unknown>(request: VendorClientRequest): Promise<T>;
  /** `request` with the body as a stream (for downloads). */
  stream(request: VendorClientRequest): Promise<VendorStreamResponse>;
  /**
   * `request` answered with `text/event-stream` (`accept` set), read event by event. The call's
   * deadline (`timeoutMs`) covers the whole stream: give a long-running one its own.
   */
  events(request: VendorClientRequest): Promise<AsyncGenerator<ServerSentEvent>>;
  /** The client's redactor (its header credentials and `secrets`), for the provider's own messages. */
  readonly redact: Redactor;
}

/** `vendorFetch` + `withRetry` for one vendor: base URL, auth headers, deadline, error extractor, retry budget. */
export function createVendorClient(options: VendorClientOptions): VendorClient {
  const base = new URL(options.baseUrl);
  const staticSecrets = [...(options.secrets ?? []), ...separateCredentials(base, options.headers).secrets];
  const redact = createRedactor(staticSecrets);
  const callOptions: VendorFetchOptions = {
    vendor: options.vendor,
    secrets: staticSecrets,
    extractError: options.extractError,
    timeoutMs: options.timeoutMs,
    maxResponseBytes: options.maxResponseBytes,
    fetch: options.fetch,
  };
  const timeoutMs = options.timeoutMs ?? DEFAULT_VENDOR_TIMEOUT_MS;
  // Every failure is already a ProviderApiError (vendorFetch translates through the one classifier).
  const call = createVendorCall<object>({
    translate: (error) => error,
    ...(options.retry ? { retry: options.retry } : {}),
    ...(options.random ? { random: options.random } : {}),
    ...(options.onRetry ? { onRetry: (operation: string, event: RetryEvent) => options.onRetry!({ ...event, operation }) } : {}),
  });

  const run = <R>(request: VendorClientRequest, send: (r: VendorRequest, o: VendorFetchOptions) => Promise<R>): Promise<R> => {
    const url = joinUrl(base, request.path, request.query);
    const headers = { ...options.headers, ...request.headers };
    const attempt = (remainingMs: number) =>
      send(
        {
          operation: request.operation,
          method: request.method,
          url,
          headers,
          body: request.body,
          json: request.json,
          timeoutMs: Math.min(request.timeoutMs ?? timeoutMs, remainingMs),
          signal: request.signal,
        },
        callOptions,
      );
    // A stream body can be sent once only.
    if (options.retry === false || request.body instanceof ReadableStream) return attempt(request.timeoutMs ?? timeoutMs);
    return call(request.operation, ({ remainingMs }) => attempt(remainingMs), { idempotent: request.idempotent, ...(request.signal ? { signal: request.signal } : {}) });
  };

  return {
    vendor: options.vendor,
    redact,
    request: (request) => run(request, vendorFetch),
    json: async <T>(request: VendorClientRequest) => {
      const headers = { accept: "application/json", ...request.headers };
      return (await run({ ...request, headers }, vendorFetch)).json<T>();
    },
    stream: (request) => run(request, vendorFetchStream),
    events: async (request) => {
      const response = await run({ ...request, headers: { accept: "text/event-stream", ...request.headers } }, vendorFetchStream);
      return readEventStream(response.body, { vendor: options.vendor, operation: request.operation });
    },
  };
}

/** `base` + path (segments percent-encoded) + query (undefined values left out). */
export function joinUrl(base: URL, path: string | readonly string[], query?: VendorClientRequest["query"]): URL {
  if (typeof path !== "string") {
    const bad = path.find((segment) => segment === "" || segment === "." || segment === "..");
    // URL parsing would drop or climb these, addressing a different resource.
    if (bad !== undefined) throw new TypeError(`path: a segment may not be empty, "." or ".." (got ${JSON.stringify(bad)})`);
  }
  const suffix = typeof path === "string" ? path.replace(/^\/+/, "") : path.map((segment) => encodeURIComponent(segment)).join("/");
  const url = new URL(base);
  url.pathname = `${base.pathname.replace(/\/+$/, "")}/${suffix}`;
  for (const [key, value] of Object.entries(query ?? {})) if (value !== undefined) url.searchParams.set(key, String(value));
  return url;
}
