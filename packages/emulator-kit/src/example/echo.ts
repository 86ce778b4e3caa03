import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { requireApiKey, requireBearer } from "../auth/http-auth.js";
import { ConnectError } from "../connect/codes.js";
import { connectServerStream, connectUnary } from "../connect/handlers.js";
import type { EmulatorDefinition } from "../emulator.js";
import { requireGrpcCredential } from "../grpc/auth.js";
import { GrpcError, GrpcStatus } from "../grpc/status.js";
import type { HttpContext } from "../http/context.js";
import { HttpError, type ErrorEnvelope } from "../http/errors.js";
import { queryInt } from "../http/query.js";
import { createRouter } from "../http/router.js";
import { openSse } from "../http/sse.js";
import { buildMultipart } from "../multipart/build.js";
import { multipartBoundary } from "../multipart/headers.js";
import { parseMultipart } from "../multipart/parse.js";
import { paginate } from "../pagination.js";
import { sleep } from "../util/sleep.js";

export const ECHO_PROTO_PATH = fileURLToPath(new URL("../../proto/echo.proto", import.meta.url));

export interface EchoOptions {
  /** Serve TLS too (same port). */
  tls?: boolean;
}

/** E2B-like error body: the numeric status is repeated in `code`. */
const echoEnvelope: ErrorEnvelope = ({ status, message }) => ({ code: status, message });

/**
 * The kit's example vendor: REST (auth, items with pagination, multipart, SSE, raw bytes),
 * Connect (unary, server stream with an exit frame), WebSocket echo and a gRPC service. It holds
 * "items" as an emulator holds sandboxes, so `leftovers()` has something to report.
 */
export const echoEmulator: EmulatorDefinition<EchoOptions> = {
  name: "echo",
  description: "The emulator kit's example API: REST, Connect, WebSocket and gRPC echo endpoints",
  async start(kit, options) {
    const apiKey = kit.credential("echo_");
    const token = kit.credential("tok_");
    const adminToken = kit.credential("adm_");
    const tokens = { [token]: { admin: false }, [adminToken]: { admin: true } };
    const items = new Map<string, { id: string; name: string }>();
    let nextItem = 1;

    const apiKeyAuth = (ctx: HttpContext) => requireApiKey(ctx, { header: "x-api-key", accept: [apiKey], invalidMessage: "invalid API key" });
    const router = createRouter({ errorEnvelope: echoEnvelope, bodyLimit: 64 * 1024 });

    router.get("/health", (ctx) => ctx.send(204));
    router.post("/echo", async (ctx) => {
      apiKeyAuth(ctx);
      return { method: ctx.method, body: (await ctx.readJson()) ?? null, query: Object.fromEntries(ctx.query) };
    });
    router.post("/items", async (ctx) => {
      apiKeyAuth(ctx);
      const body = (await ctx.readJson<{ name?: unknown }>()) ?? {};
      if (typeof body.name !== "string" || body.name === "") throw new HttpError(400, "name: must be a non-empty string");
      const item = { id: `item-${String(nextItem++).padStart(4, "0")}`, name: body.name };
      items.set(item.id, item);
      ctx.sendJson(201, item);
    });
    router.get("/items", (ctx) => {
      apiKeyAuth(ctx);
      const page = paginate(
        [...items.values()],
        { cursor: ctx.query.get("cursor"), limit: queryInt(ctx.query, "limit", { min: 1, max: 100 }) },
        {
          key: (item) => item.id,
          defaultLimit: 10,
          maxLimit: 100,
        },
      );
      ctx.sendJson(200, page.items, page.nextCursor ? { "x-next-token": page.nextCursor } : {});
    });
    router.delete("/items/:id", (ctx) => {
      apiKeyAuth(ctx);
      if (!items.delete(ctx.params.id!)) throw new HttpError(404, `item ${ctx.params.id} not found`);
      ctx.send(204);
    });
    router.get("/admin/stats", (ctx) => {
      requireBearer(ctx, { accept: tokens, authorize: (principal) => principal.admin, challenge: 'Bearer realm="echo"', forbiddenMessage: "admin token required" });
      return { items: items.size };
    });
    router.get("/bytes", (ctx) => {
      const size = queryInt(ctx.query, "size", { min: 0, max: 64 * 1024 * 1024, default: 1024 })!;
      ctx.send(200, Buffer.alloc(size, 0x61), { "content-type": "application/octet-stream" });
    });
    // Multipart in, multipart out: the same parts with a digest header each.
    router.post(
      "/files",
      async (ctx) => {
        apiKeyAuth(ctx);
        const boundary = multipartBoundary(ctx.header("content-type"));
        if (!boundary) throw new HttpError(400, "content-type: must be multipart/form-data with a boundary");
        const parts = [];
        for await (const part of parseMultipart(ctx.body(), boundary, { maxPartBytes: 8 * 1024 * 1024, maxParts: 32 })) {
          const data = await part.bytes();
          parts.push({
            name: part.name,
            filename: part.filename,
            contentType: part.contentType,
            headers: { "x-sha256": createHash("sha256").update(data).digest("hex") },
            data,
          });
        }
        const built = buildMultipart(parts);
        ctx.send(200, built.body, { "content-type": built.contentType });
      },
      { bodyLimit: 16 * 1024 * 1024 },
    );
    router.get("/events", async (ctx) => {
      const count = queryInt(ctx.query, "count", { min: 0, max: 1000, default: 3 })!;
      const intervalMs = queryInt(ctx.query, "intervalMs", { min: 0, max: 60_000, default: 10 })!;
      const sse = openSse(ctx, { keepaliveMs: queryInt(ctx.query, "keepaliveMs", { min: 0, max: 60_000, default: 15_000 }) });
      for (let n = 1; n <= count && !sse.closed; n++) {
        await sleep(intervalMs, ctx.signal);
        sse.send({ event: "tick", data: { n } });
      }
      const drop = ctx.shouldDrop("exit-frame");
      if (!drop) sse.send({ event: "done", data: { exitCode: 0 } });
      if (drop?.then !== "hang") sse.close();
    });

    connectUnary<{ text?: string }, { text: string }>(router, "/echo.v1.EchoService/Say", (request) => {
      if (typeof request.text !== "string") throw new ConnectError("invalid_argument", "text: must be a string");
      return { text: request.text };
    });
    connectUnary<{ ms?: number }, { sleptMs: number }>(router, "/echo.v1.EchoService/Sleep", async (request, call) => {
      const started = Date.now();
      await sleep(request.ms ?? 0, call.signal);
      return { sleptMs: Date.now() - started };
    });
    connectServerStream<{ count?: number; intervalMs?: number }, object>(router, "/echo.v1.EchoService/Count", async (request, stream, call) => {
      requireApiKey(call.ctx, { header: "x-api-key", accept: [apiKey] });
      for (let n = 1; n <= (request.count ?? 3) && !call.signal.aborted; n++) {
        await sleep(request.intervalMs ?? 0, call.signal);
        if (call.signal.aborted) return;
        stream.send({ event: { tick: n } });
      }
      const drop = call.shouldDrop("exit-frame");
      if (!drop) stream.send({ event: { end: { exitCode: 0 } } });
      else if (drop.then === "hang") stream.hang();
    });

    router.ws("/ws/echo", {
      protocols: ["v5.echo", "v4.echo"],
      before: (ctx) => void requireBearer(ctx, { accept: tokens, queryParam: "access_token" }),
      onConnection(socket, ctx) {
        socket.on("message", (data, isBinary) => {
          const text = data.toString();
          if (!isBinary && text === "exit") {
            const drop = ctx.shouldDrop("exit-frame");
            if (!drop) socket.send(JSON.stringify({ exit: 0 }));
            if (drop?.then !== "hang") socket.close(1000, "done");
            return;
          }
          socket.send(data, { binary: isBinary });
        });
      },
    });

    const http = await kit.http(router, { tls: options.tls });
    const grpc = await kit.grpc({
      protoPath: ECHO_PROTO_PATH,
      tls: options.tls,
      authorize: (call) => void requireGrpcCredential(call.metadata, { accept: tokens }),
      services: {
        "echo.v1.Echo": {
          Say: (request: { text: string }) => ({ text: request.text, length: String(request.text.length) }),
          Count: async (request: { count: number; interval_ms: number }, call) => {
            for (let n = 1; n <= request.count && !call.signal.aborted; n++) {
              await sleep(request.interval_ms, call.signal);
              call.write({ tick: n });
            }
            const drop = call.shouldDrop("exit-frame");
            if (!drop) call.write({ exit_code: 0 });
            else if (drop.then === "hang") call.hang();
          },
          Sum: async (requests: AsyncIterable<{ value: string }>) => {
            let total = 0n;
            let count = 0;
            for await (const request of requests) {
              total += BigInt(request.value);
              count++;
            }
            if (count === 0) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "Sum needs at least one value");
            return { total: total.toString(), count };
          },
          Chat: async (messages: AsyncIterable<{ text: string }>, call) => {
            for await (const message of messages) call.write({ text: message.text.toUpperCase() });
          },
        },
      },
    });

    return {
      url: http.url,
      endpoints: { grpc: grpc.target, ...(http.secureUrl ? { https: http.secureUrl } : {}), ...(grpc.secureUrl ? { grpcTls: grpc.secureUrl } : {}) },
      credentials: { apiKey, token, adminToken },
      env: { ECHO_API_URL: http.url, ECHO_API_KEY: apiKey, ECHO_GRPC_TARGET: grpc.target },
      leftovers: async () => [...items.keys()].map((id) => `item ${id}`),
    };
  },
};
