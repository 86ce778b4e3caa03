import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { HttpError, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { WebSocket } from "ws";

const PREFIX = "/api/paperclip-sandbox/v1";
/** Headers that describe one hop, not the message. */
const HOP = new Set(["host", "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "proxy-connection", "te", "trailer"]);

/** Routes only this repository's bridge has; a bridge from upstream's template answers them 404. */
const EXTRA_ROUTES: Array<[string, RegExp]> = [
  ["GET", /^\/leases$/],
  ["GET", /^\/leases\/[^/]+$/],
  ["PUT", /^\/files$/],
  ["GET", /^\/files$/],
  ["PUT", /^\/exec\/[^/]+\/stdin$/],
  ["POST", /^\/exec\/[^/]+\/stdin\/close$/],
  ["POST", /^\/exec\/[^/]+\/kill$/],
  ["GET", /^\/terminal$/],
];

/** A command request's body at most (inline stdin is up to 48 KiB, base64 in JSON). */
const EXEC_BODY_LIMIT = 16 * 1024 * 1024;

/**
 * How a `POST /exec` asked to run, noted on its record (`execMode`): `process` (a streamed process,
 * this bridge's extension), `stream` (upstream's text SSE), `json` (one answer at the end).
 */
function execModeOf(body: Buffer): "process" | "stream" | "json" | "invalid" {
  try {
    const parsed = JSON.parse(body.toString("utf8")) as { streamOutput?: unknown; outputEncoding?: unknown };
    if (parsed.streamOutput === true) return parsed.outputEncoding === "base64" ? "process" : "stream";
    return "json";
  } catch {
    return "invalid";
  }
}

export interface FrontOptions {
  /** The workerd socket miniflare serves the Worker on. */
  workerUrl: () => string;
  /**
   * Answer as a bridge deployed from upstream's template would: no `extensions` in the health
   * answer, 404 `not_found` for this bridge's extra routes.
   */
  legacy: boolean;
}

/**
 * The emulator's public origin: every request goes to the Worker in workerd unchanged, both bodies
 * streamed. Being in front lets the kit's recorder count bridge requests and its faults act on them.
 */
export function registerFront(router: Router, options: FrontOptions): void {
  const forward = async (ctx: HttpContext) => {
    const path = ctx.path.replace(/\/+$/, "");
    if (options.legacy && path.startsWith(PREFIX)) {
      const rest = path.slice(PREFIX.length);
      if (EXTRA_ROUTES.some(([method, pattern]) => method === ctx.method && pattern.test(rest)) && ctx.header("authorization")) {
        ctx.record.markUnserved("an upstream-template bridge has no such route");
        return ctx.sendJson(404, { error: "not_found", message: `No bridge route matched ${ctx.method} ${path}.` });
      }
    }
    const target = new URL(ctx.req.url ?? "/", options.workerUrl());
    const headers = new Headers();
    for (const [name, value] of Object.entries(ctx.req.headers)) {
      if (HOP.has(name) || name.startsWith(":") || value === undefined) continue;
      headers.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    const hasBody = ctx.method !== "GET" && ctx.method !== "HEAD";
    // A command's request is small JSON: read whole, so the record says how it asked to run.
    const execBody = ctx.method === "POST" && path === `${PREFIX}/exec` ? await ctx.readBytes(EXEC_BODY_LIMIT) : undefined;
    if (execBody) ctx.record.note("execMode", execModeOf(execBody));
    let response: Response;
    try {
      response = await fetch(target, {
        method: ctx.method,
        headers,
        ...(execBody ? { body: execBody } : hasBody ? { body: Readable.toWeb(ctx.body()) as ReadableStream, duplex: "half" } : {}),
        signal: ctx.signal,
        redirect: "manual",
      } as RequestInit);
    } catch (error) {
      if (ctx.signal.aborted) return;
      throw new HttpError(502, `the Worker did not answer: ${(error as Error).message}`);
    }
    const out: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      if (!HOP.has(name) && name !== "content-encoding") out[name] = value;
    });
    if (options.legacy && path === `${PREFIX}/health` && response.status === 200) {
      const body = (await response.json()) as { capabilities?: Record<string, unknown> };
      if (body.capabilities) delete body.capabilities.extensions;
      return ctx.sendJson(200, { ...body, bridgeVersion: "0.1.0" });
    }
    ctx.res.writeHead(response.status, out);
    if (!response.body) return void ctx.res.end();
    await pipeline(Readable.fromWeb(response.body as import("node:stream/web").ReadableStream), ctx.res).catch(() => undefined);
  };
  // The terminal route is a WebSocket: the Worker's socket opened first (its refusal, a status
  // instead of 101, is the client's answer as is), then relayed frame for frame.
  const opened = new WeakMap<object, { worker: WebSocket; early: Array<[Buffer, boolean]> }>();
  router.ws(`${PREFIX}/terminal`, {
    async before(ctx) {
      if (options.legacy && ctx.header("authorization")) {
        ctx.record.markUnserved("an upstream-template bridge has no such route");
        throw new HttpError(404, `No bridge route matched GET ${PREFIX}/terminal.`, { code: "not_found" });
      }
      const target = new URL(ctx.req.url ?? "/", options.workerUrl().replace(/^http/, "ws"));
      const authorization = ctx.header("authorization");
      const worker = new WebSocket(target, { headers: authorization ? { authorization } : {}, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
      const early: Array<[Buffer, boolean]> = [];
      // Output the Worker sends before the client's socket exists is kept for it.
      worker.on("message", (data: Buffer, isBinary: boolean) => early.push([data, isBinary]));
      await new Promise<void>((resolve, reject) => {
        worker.once("open", () => resolve());
        worker.once("unexpected-response", (_request, response) => {
          let body = "";
          response.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
          response.on("end", () => {
            let parsed: { error?: string; message?: string } = {};
            try {
              parsed = JSON.parse(body) as typeof parsed;
            } catch {
              // not the bridge's JSON
            }
            reject(new HttpError(response.statusCode ?? 502, parsed.message ?? `the Worker answered HTTP ${response.statusCode}`, parsed.error ? { code: parsed.error } : {}));
          });
        });
        worker.once("error", (error) => reject(new HttpError(502, `the Worker did not answer: ${error.message}`)));
      });
      opened.set(ctx.req, { worker, early });
    },
    onConnection(socket, ctx) {
      const { worker, early } = opened.get(ctx.req)!;
      worker.removeAllListeners("message");
      for (const [data, isBinary] of early.splice(0)) socket.send(data, { binary: isBinary });
      worker.on("message", (data: Buffer, isBinary: boolean) => socket.readyState === socket.OPEN && socket.send(data, { binary: isBinary }));
      socket.on("message", (data: Buffer, isBinary: boolean) => worker.readyState === worker.OPEN && worker.send(data, { binary: isBinary }));
      worker.on("error", () => socket.readyState === socket.OPEN && socket.close(1011, "the Worker's socket failed"));
      worker.on("close", (code: number, reason: Buffer) => socket.readyState === socket.OPEN && socket.close(code === 1005 || code === 1006 ? 1011 : code, reason));
      socket.on("close", () => worker.close());
    },
  });
  for (const method of ["GET", "POST", "PUT", "DELETE"] as const) {
    router.route(method, `${PREFIX}/exec`, forward);
    router.route(method, `${PREFIX}/exec/:processId/stdin`, forward);
    router.route(method, `${PREFIX}/exec/:processId/stdin/close`, forward);
    router.route(method, `${PREFIX}/exec/:processId/kill`, forward);
    router.route(method, `${PREFIX}/files`, forward);
    router.route(method, `${PREFIX}/leases/:action`, forward);
    router.route(method, `${PREFIX}/*rest`, forward);
    router.route(method, "/*any", forward);
  }
}
