import { setMaxListeners } from "node:events";
import http from "node:http";
import http2 from "node:http2";
import type { FaultInjector } from "../faults/injector.js";
import type { RequestRecorder } from "../recorder/recorder.js";
import { redactHeaders } from "../recorder/redact-headers.js";
import { sleep } from "../util/sleep.js";
import { DEFAULT_BODY_LIMIT } from "./body.js";
import { createHttpContext } from "./context.js";
import { HttpError, defaultErrorEnvelope } from "./errors.js";
import { listen, type Listener } from "./listener.js";
import { tapResponse } from "./response-tap.js";
import type { RawAnswer, Router } from "./router.js";
import { generateSelfSignedCertificate, type SelfSignedCertificate } from "./tls-cert.js";
import type { HttpRequest, HttpResponse } from "./types.js";
import { createUpgradeHandler } from "./websocket.js";

export interface HttpServerOptions {
  router: Router;
  recorder: RequestRecorder;
  faults: FaultInjector;
  /** Default 127.0.0.1; the kit serves loopback only unless told otherwise. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  /** Also accept TLS on the same port: `true` makes a throwaway self-signed certificate. */
  tls?: boolean | SelfSignedCertificate;
  /** Header names (beyond the kit's list) whose values are never recorded. */
  secretHeaders?: readonly string[];
  /** Bugs in handlers land here (default: one line on stderr; the client gets a generic 500). */
  onUnexpectedError?: (error: unknown, where: string) => void;
  /**
   * The server stands in for a hop inside the vendor (Cloudflare's Durable Object to its container),
   * not an API a client calls: faults on `*` pass it by (a latency meant as the client's round trip
   * is not paid again inside); a fault naming one of its routes still applies.
   */
  internal?: boolean;
}

export interface HttpServer {
  /** `http://host:port`: HTTP/1.1 and prior-knowledge h2c. */
  readonly url: string;
  /** `https://host:port` (same port) when TLS is on. */
  readonly secureUrl: string | undefined;
  readonly host: string;
  readonly port: number;
  /** The certificate served over TLS; clients trust `certPem` as their CA. */
  readonly certificate: SelfSignedCertificate | undefined;
  readonly listener: Listener;
  /** Aborts running handlers, terminates WebSockets and connections, releases the port. */
  close(): Promise<void>;
}

export const defaultUnexpectedError = (error: unknown, where: string) => {
  process.stderr.write(`[emulator-kit] ${where}: ${error instanceof Error ? error.message : String(error)}\n`);
};

export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const { router, recorder } = options;
  const faults: FaultInjector = options.internal ? { ...options.faults, take: (kind, target) => options.faults.take(kind, { ...target, internal: true }) } : options.faults;
  const errorEnvelope = router.options.errorEnvelope ?? defaultErrorEnvelope;
  const bodyLimit = router.options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const secretHeaders = options.secretHeaders ?? [];
  const onUnexpectedError = options.onUnexpectedError ?? defaultUnexpectedError;
  const certificate = options.tls === true ? generateSelfSignedCertificate() : options.tls || undefined;
  const closing = new AbortController();
  // One listener per request in flight, removed when it ends: bounded by the requests, not a leak.
  setMaxListeners(0, closing.signal);

  const dispatch = async (req: HttpRequest, res: HttpResponse) => {
    const method = (req.method ?? "GET").toUpperCase();
    const url = new URL(req.url ?? "/", "http://emulator");
    const path = url.pathname;
    const found = router.match(method, path);
    const matched = found && "route" in found ? found : undefined;
    const record = recorder.start({
      protocol: "http",
      method,
      route: matched?.route.pattern.source ?? null,
      path,
      headers: redactHeaders(req.headers, secretHeaders),
    });
    // One controller per request, aborted by the client leaving or the server closing. (Not
    // AbortSignal.any: on Node 20 it keeps every derived signal alive on the long-lived parent.)
    const client = new AbortController();
    const onClosing = () => client.abort(closing.signal.reason);
    closing.signal.addEventListener("abort", onClosing, { once: true });
    res.once("close", () => {
      closing.signal.removeEventListener("abort", onClosing);
      if (!res.writableFinished) client.abort(new Error("client closed the request"));
      record.finish(res.headersSent ? res.statusCode : 499);
    });
    const envelope = matched?.route.options.errorEnvelope ?? errorEnvelope;
    const answerRaw = (answer: RawAnswer) => {
      if (res.headersSent) return;
      const text = typeof answer.body === "string";
      const body = Buffer.from(text ? (answer.body as string) : JSON.stringify(answer.body));
      record.addBytesOut(body.length);
      const type = answer.contentType ?? (text ? "text/plain; charset=utf-8" : "application/json");
      res.writeHead(answer.status, { ...answer.headers, "content-type": type, "content-length": body.length });
      (Object.getPrototypeOf(res) as { end: (this: HttpResponse, b: Buffer) => void }).end.call(res, body);
    };
    const fail = (error: HttpError) => {
      if (res.headersSent) return;
      const body = Buffer.from(JSON.stringify(envelope(error.info)));
      record.addBytesOut(body.length);
      res.writeHead(error.status, { "content-type": "application/json", "content-length": body.length, ...error.headers });
      // Not through the tap: error bodies written here are counted above.
      (Object.getPrototypeOf(res) as { end: (this: HttpResponse, b: Buffer) => void }).end.call(res, body);
    };

    if (!matched) {
      const notFound = router.options.notFound;
      record.markUnserved(found && "allowed" in found ? "method not allowed" : "no route");
      if (notFound) return answerRaw(notFound(method, path));
      if (found && "allowed" in found) {
        return fail(new HttpError(405, `${method} is not allowed on ${path}`, { headers: { allow: found.allowed.join(", ") } }));
      }
      return fail(new HttpError(404, `no route for ${method} ${path}`));
    }
    const { route, params } = matched;
    const target = { route: route.pattern.source, method };
    const take = <K extends Parameters<FaultInjector["take"]>[0]>(kind: K) => {
      const fault = faults.take(kind, target);
      if (fault) record.fault(kind);
      return fault;
    };
    const signal = client.signal;
    try {
      const latency = take("latency");
      if (latency) await sleep(latency.ms, signal);
      const status = take("status");
      if (status) throw new HttpError(status.status ?? 503, status.message ?? "injected fault: service unavailable");
      const limited = take("rate-limit");
      if (limited) {
        throw new HttpError(429, limited.message ?? "injected fault: rate limited", {
          headers: { "retry-after": String(limited.retryAfterSeconds ?? 1) },
        });
      }
      const reset = take("reset");
      const tap = tapResponse(res, record, reset ? (reset.afterBytes ?? 0) : undefined);
      const ctx = createHttpContext({
        req,
        res,
        method,
        path,
        route: route.pattern.source,
        params,
        query: url.searchParams,
        record,
        faults,
        errorEnvelope: envelope,
        bodyLimit: route.options.bodyLimit ?? bodyLimit,
        signal,
        tap,
      });
      const result = await route.handler(ctx);
      if (result !== undefined && !res.headersSent) ctx.sendJson(200, result);
    } catch (error) {
      if (error instanceof HttpError) return fail(error);
      onUnexpectedError(error, `${method} ${route.pattern.source}`);
      if (res.headersSent) res.destroy();
      else fail(new HttpError(500, "internal emulator error"));
    }
  };

  const onRequest = (req: HttpRequest, res: HttpResponse) => void dispatch(req, res);
  const http1 = http.createServer({ keepAliveTimeout: 30_000 }, onRequest);
  const upgrades = createUpgradeHandler({ router, recorder, faults, errorEnvelope, secretHeaders, onUnexpectedError });
  http1.on("upgrade", upgrades.handle);
  http1.on("clientError", (_error, socket) => socket.destroy());
  const h2 = http2.createServer({}, onRequest);
  h2.on("sessionError", () => undefined);

  const listener = await listen(
    { http1: (socket) => http1.emit("connection", socket), http2: (socket) => h2.emit("connection", socket) },
    { host: options.host, port: options.port, tls: certificate },
  );
  const authority = listener.host.includes(":") ? `[${listener.host}]` : listener.host;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${authority}:${listener.port}`,
    secureUrl: certificate ? `https://${authority}:${listener.port}` : undefined,
    host: listener.host,
    port: listener.port,
    certificate,
    listener,
    close() {
      closed ??= (async () => {
        closing.abort(new Error("emulator closing"));
        upgrades.closeAll();
        await listener.close();
        http1.close();
        h2.close();
      })();
      return closed;
    },
  };
}
