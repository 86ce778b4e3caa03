import type { IncomingHttpHeaders } from "node:http";
import { PassThrough, type Readable } from "node:stream";
import type { FaultInjector } from "../faults/injector.js";
import type { FaultKind, FaultOf } from "../faults/types.js";
import type { RecordHandle } from "../recorder/recorder.js";
import { readBytes, readJson } from "./body.js";
import { HttpError, type ErrorEnvelope, type HttpErrorOptions } from "./errors.js";
import type { ResponseTap } from "./response-tap.js";
import type { HttpRequest, HttpResponse } from "./types.js";

/** What a route handler gets for one request. */
export interface HttpContext {
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  /** The matched route pattern. */
  readonly route: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly httpVersion: "1.1" | "2";
  readonly secure: boolean;
  /** Aborts when the client goes away before the response ends, or the server closes. */
  readonly signal: AbortSignal;
  readonly req: HttpRequest;
  readonly res: HttpResponse;
  readonly record: RecordHandle;
  readonly faults: FaultInjector;
  readonly errorEnvelope: ErrorEnvelope;
  /** Cap for readBytes/readText/readJson unless one is passed. */
  readonly bodyLimit: number;
  /** A header's value (the first one when repeated). */
  header(name: string): string | undefined;
  /** The request body as a stream (counted into the record); read it once. */
  body(): Readable;
  readBytes(limit?: number): Promise<Buffer>;
  readText(limit?: number): Promise<string>;
  /** `undefined` for an empty body; 400 for bad JSON; 413 past the limit. */
  readJson<T = unknown>(limit?: number): Promise<T | undefined>;
  send(status: number, body?: string | Uint8Array, headers?: Record<string, string | number>): void;
  sendJson(status: number, value: unknown, headers?: Record<string, string | number>): void;
  /** An error answer through the route's vendor envelope. */
  sendError(status: number, message: string, options?: HttpErrorOptions): void;
  /** Takes (and records) an armed fault of `kind` for this route; stream helpers use it. */
  takeFault<K extends FaultKind>(kind: K): FaultOf<K> | undefined;
  /** Hook: should the stream's final message be suppressed? Recorded when it says yes. */
  shouldDrop(kind: "exit-frame"): FaultOf<"exit-frame"> | undefined;
  /** Cuts the exchange without a proper end (socket destroyed / stream reset). */
  cut(): void;
}

export interface ContextInit {
  req: HttpRequest;
  res: HttpResponse;
  method: string;
  path: string;
  route: string;
  params: Record<string, string>;
  query: URLSearchParams;
  record: RecordHandle;
  faults: FaultInjector;
  errorEnvelope: ErrorEnvelope;
  bodyLimit: number;
  signal: AbortSignal;
  tap: ResponseTap;
}

export function createHttpContext(init: ContextInit): HttpContext {
  const { req, res, record, faults } = init;
  let bodyStream: Readable | undefined;

  const body = (): Readable => {
    if (bodyStream) return bodyStream;
    const counted = new PassThrough({
      transform(chunk: Buffer, _encoding, callback) {
        record.addBytesIn(chunk.length);
        callback(null, chunk);
      },
    });
    (req as Readable).on("error", (error) => counted.destroy(error));
    (req as Readable).pipe(counted);
    bodyStream = counted;
    return counted;
  };

  const send: HttpContext["send"] = (status, payload, headers = {}) => {
    if (res.headersSent) return;
    const bytes = payload === undefined ? undefined : typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
    res.writeHead(status, { ...headers, ...(bytes === undefined ? {} : { "content-length": bytes.byteLength }) });
    if (bytes === undefined) res.end();
    else res.end(bytes);
  };

  const sendJson: HttpContext["sendJson"] = (status, value, headers = {}) => send(status, JSON.stringify(value), { "content-type": "application/json", ...headers });

  const takeFault = <K extends FaultKind>(kind: K): FaultOf<K> | undefined => {
    const fault = faults.take(kind, { route: init.route, method: init.method });
    if (fault) record.fault(kind);
    return fault;
  };

  return {
    method: init.method,
    path: init.path,
    route: init.route,
    params: init.params,
    query: init.query,
    headers: req.headers,
    httpVersion: req.httpVersion.startsWith("2") ? "2" : "1.1",
    secure: Boolean((req.socket as { encrypted?: boolean } | undefined)?.encrypted),
    signal: init.signal,
    req,
    res,
    record,
    faults,
    errorEnvelope: init.errorEnvelope,
    bodyLimit: init.bodyLimit,
    header(name) {
      const value = req.headers[name.toLowerCase()];
      return Array.isArray(value) ? value[0] : value;
    },
    body,
    readBytes: (limit = init.bodyLimit) => readBytes(body(), limit),
    readText: async (limit = init.bodyLimit) => (await readBytes(body(), limit)).toString("utf8"),
    readJson: <T>(limit = init.bodyLimit) => readJson<T>(body(), limit),
    send,
    sendJson,
    sendError(status, message, options = {}) {
      const error = new HttpError(status, message, options);
      sendJson(status, init.errorEnvelope(error.info), error.headers);
    },
    takeFault,
    shouldDrop: (kind) => takeFault(kind),
    cut: () => init.tap.cut(),
  };
}
