import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import type { FaultInjector } from "../faults/injector.js";
import type { FaultKind, FaultOf } from "../faults/types.js";
import type { RecordHandle, RequestRecorder } from "../recorder/recorder.js";
import { redactHeaders } from "../recorder/redact-headers.js";
import { HttpError, type ErrorEnvelope } from "./errors.js";
import type { PathPattern } from "./pattern.js";
import type { Router } from "./router.js";
import { sleep } from "../util/sleep.js";

/** What a WebSocket endpoint's hooks get. */
export interface WebSocketContext {
  readonly path: string;
  readonly route: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly req: IncomingMessage;
  readonly record: RecordHandle;
  /** The negotiated sub-protocol ('' before the upgrade or when none). */
  readonly protocol: string;
  header(name: string): string | undefined;
  takeFault<K extends FaultKind>(kind: K): FaultOf<K> | undefined;
  shouldDrop(kind: "exit-frame"): FaultOf<"exit-frame"> | undefined;
}

export interface WebSocketRoute {
  readonly pattern: PathPattern;
  /** Runs before the upgrade (auth, validation); throw {@link HttpError} to refuse with the vendor body. */
  before?: (ctx: WebSocketContext) => void | Promise<void>;
  /** Sub-protocols this endpoint speaks, preferred first; the first one the client also offers wins. */
  protocols?: readonly string[];
  /** Refuse the upgrade (400) when the client offers none of `protocols` (default false: no sub-protocol). */
  requireProtocol?: boolean;
  /** Largest message accepted, bytes (default 16 MiB). */
  maxPayload?: number;
  errorEnvelope?: ErrorEnvelope;
  /** The socket is a plain `ws` WebSocket: sends are counted and subject to the drop-stream fault. */
  onConnection(socket: WebSocket, ctx: WebSocketContext): void | Promise<void>;
}

export interface UpgradeDeps {
  router: Router;
  recorder: RequestRecorder;
  faults: FaultInjector;
  errorEnvelope: ErrorEnvelope;
  secretHeaders: readonly string[];
  onUnexpectedError(error: unknown, where: string): void;
}

export interface UpgradeHandler {
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Terminates every open WebSocket. */
  closeAll(): void;
}

export function createUpgradeHandler(deps: UpgradeDeps): UpgradeHandler {
  const servers = new Map<WebSocketRoute, WebSocketServer>();

  const serverFor = (route: WebSocketRoute) => {
    let server = servers.get(route);
    if (!server) {
      server = new WebSocketServer({
        noServer: true,
        perMessageDeflate: false,
        maxPayload: route.maxPayload ?? 16 * 1024 * 1024,
        handleProtocols: (offered) => route.protocols?.find((protocol) => offered.has(protocol)) ?? false,
      });
      servers.set(route, server);
    }
    return server;
  };

  const handle = async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    const url = new URL(req.url ?? "/", "http://emulator");
    const path = url.pathname;
    const match = deps.router.matchWebSocket(path);
    const record = deps.recorder.start({
      protocol: "ws",
      method: req.method ?? "GET",
      route: match?.route.pattern.source ?? null,
      path,
      headers: redactHeaders(req.headers, deps.secretHeaders),
    });
    const envelope = match?.route.errorEnvelope ?? deps.errorEnvelope;
    const refuse = (error: HttpError) => {
      const body = Buffer.from(JSON.stringify(envelope(error.info)));
      const headers = { "content-type": "application/json", "content-length": String(body.length), connection: "close", ...error.headers };
      const lines = [`HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? "Error"}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
      record.addBytesOut(body.length);
      record.finish(error.status);
      socket.end(Buffer.concat([Buffer.from(lines.join("\r\n") + "\r\n\r\n"), body]));
    };
    if (!match) {
      record.markUnserved("no route");
      return refuse(new HttpError(404, `no WebSocket endpoint at ${path}`));
    }
    const { route, params } = match;

    let protocol = "";
    const takeFault = <K extends FaultKind>(kind: K) => {
      const fault = deps.faults.take(kind, { route: route.pattern.source, method: "GET" });
      if (fault) record.fault(kind);
      return fault;
    };
    const ctx: WebSocketContext = {
      path,
      route: route.pattern.source,
      params,
      query: url.searchParams,
      headers: req.headers,
      req,
      record,
      get protocol() {
        return protocol;
      },
      header(name) {
        const value = req.headers[name.toLowerCase()];
        return Array.isArray(value) ? value[0] : value;
      },
      takeFault,
      shouldDrop: (kind) => takeFault(kind),
    };

    try {
      const latency = takeFault("latency");
      if (latency) await sleep(latency.ms);
      const status = takeFault("status");
      if (status) throw new HttpError(status.status ?? 503, status.message ?? "injected fault: service unavailable");
      const limited = takeFault("rate-limit");
      if (limited) {
        throw new HttpError(429, limited.message ?? "injected fault: rate limited", {
          headers: { "retry-after": String(limited.retryAfterSeconds ?? 1) },
        });
      }
      await route.before?.(ctx);
      const offered = String(req.headers["sec-websocket-protocol"] ?? "")
        .split(",")
        .map((p) => p.trim())
        .filter(Boolean);
      if (route.requireProtocol && !route.protocols?.some((p) => offered.includes(p))) {
        throw new HttpError(400, `no supported WebSocket sub-protocol offered (supported: ${route.protocols?.join(", ") ?? "none"})`);
      }
    } catch (error) {
      if (error instanceof HttpError) return refuse(error);
      deps.onUnexpectedError(error, `WS ${route.pattern.source}`);
      return refuse(new HttpError(500, "internal emulator error"));
    }

    const reset = takeFault("reset");
    const drop = takeFault("drop-stream");
    serverFor(route).handleUpgrade(req, socket, head, (ws) => {
      protocol = ws.protocol;
      instrument(ws, record, drop?.afterMessages ?? (reset ? 0 : undefined));
      ws.on("close", (code) => record.finish(101, `close:${code}`));
      if (reset || drop?.afterMessages === 0) return;
      Promise.resolve(route.onConnection(ws, ctx)).catch((error) => {
        deps.onUnexpectedError(error, `WS ${route.pattern.source}`);
        ws.close(1011, "internal emulator error");
      });
    });
  };

  return {
    handle: (req, socket, head) => void handle(req, socket, head),
    closeAll() {
      for (const server of servers.values()) {
        for (const client of server.clients) client.terminate();
        server.close();
      }
    },
  };
}

type SendArgs = Parameters<WebSocket["send"]>;

/** Counts messages both ways; with `cutAfter`, terminates the socket once that many were sent. */
function instrument(ws: WebSocket, record: RecordHandle, cutAfter: number | undefined): void {
  ws.on("message", (data: Buffer | ArrayBuffer | Buffer[]) => record.messageIn(byteLength(data)));
  if (cutAfter === 0) {
    ws.terminate();
    return;
  }
  const send = ws.send.bind(ws) as (data: SendArgs[0], options: object, callback?: (error?: Error) => void) => void;
  let sent = 0;
  let cutting = false;
  ws.send = ((data: SendArgs[0], options?: object | ((error?: Error) => void), callback?: (error?: Error) => void) => {
    if (typeof options === "function") {
      callback = options as (error?: Error) => void;
      options = {};
    }
    if (cutting) {
      callback?.(new Error("WebSocket dropped by an injected fault"));
      return;
    }
    record.messageOut(byteLength(data));
    sent++;
    if (cutAfter !== undefined && sent >= cutAfter) {
      cutting = true;
      send(data, options ?? {}, (error) => {
        ws.terminate();
        callback?.(error);
      });
      return;
    }
    send(data, options ?? {}, callback);
  }) as WebSocket["send"];
}

function byteLength(data: unknown): number {
  if (Buffer.isBuffer(data)) return data.length;
  if (Array.isArray(data)) return data.reduce((sum: number, part: Buffer) => sum + part.length, 0);
  if (data instanceof ArrayBuffer) return data.byteLength;
  if (ArrayBuffer.isView(data)) return data.byteLength;
  if (typeof data === "string") return Buffer.byteLength(data);
  return Buffer.byteLength(String(data));
}
