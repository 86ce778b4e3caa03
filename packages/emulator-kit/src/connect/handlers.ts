import type { HttpContext } from "../http/context.js";
import { HttpError, type ErrorEnvelope } from "../http/errors.js";
import type { Router } from "../http/router.js";
import { flushHeaders, writeChunk } from "../http/types.js";
import { CONNECT_CODE_STATUS, ConnectError, connectCodeForStatus } from "./codes.js";
import { startDeadline, parseConnectTimeout } from "./deadline.js";
import { EnvelopeError, FLAG_COMPRESSED, FLAG_END_STREAM, encodeEnvelope, readEnvelopes } from "./envelope.js";

/** What a Connect handler gets besides its request message. */
export interface ConnectCall {
  readonly ctx: HttpContext;
  /** Aborts at the Connect deadline, when the client goes away, or when the server closes. */
  readonly signal: AbortSignal;
  /** Epoch ms of the deadline from `Connect-Timeout-Ms`, if any. */
  readonly deadline: number | undefined;
  readonly timeoutMs: number | undefined;
  header(name: string): string | undefined;
  /** Response headers to send (unary: with the answer; streams: before the first message). */
  readonly responseHeaders: Record<string, string>;
  /** Streams: metadata for the end-stream message. */
  readonly trailers: Record<string, string[]>;
  shouldDrop(kind: "exit-frame"): ReturnType<HttpContext["shouldDrop"]>;
}

export interface ConnectServerStream<Res> {
  /** Sends one message; ignored once the stream has ended or been cut. */
  send(message: Res): void;
  /** Ends with the end-stream message (an error, if given). Later calls are ignored. */
  end(error?: ConnectError): void;
  /** Leaves the stream open with no end-stream message, e.g. after a suppressed exit frame. */
  hang(): void;
  readonly ended: boolean;
}

export interface ConnectRouteOptions {
  /** Largest request message accepted (default 4 MiB). */
  maxMessageBytes?: number;
}

export type ConnectUnaryHandler<Req, Res> = (request: Req, call: ConnectCall) => Res | Promise<Res>;
export type ConnectServerStreamHandler<Req, Res> = (request: Req, stream: ConnectServerStream<Res>, call: ConnectCall) => void | Promise<void>;
/**
 * A client stream's handler: `messages` yields each request message as it arrives (the request
 * body is read as it comes, never buffered whole) and ends at the end of the body; the handler's
 * value is the one response message.
 */
export type ConnectClientStreamHandler<Req, Res> = (messages: AsyncIterable<Req>, call: ConnectCall) => Res | Promise<Res>;

/** Error bodies on Connect routes (faults, auth helpers) are Connect errors too. */
export const connectErrorEnvelope: ErrorEnvelope = ({ status, message, code }) => ({
  code: code && (CONNECT_CODE_STATUS as Record<string, number>)[code] !== undefined ? code : connectCodeForStatus(status),
  message,
});

const UNARY_TYPE = /^application\/json(\s*;\s*charset=utf-8)?$/i;
const STREAM_TYPE = /^application\/connect\+json(\s*;\s*charset=utf-8)?$/i;

/** Registers `POST <path>` as a Connect unary method with the JSON codec. */
export function connectUnary<Req = unknown, Res = unknown>(router: Router, path: string, handler: ConnectUnaryHandler<Req, Res>, options: ConnectRouteOptions = {}): Router {
  const maxMessageBytes = options.maxMessageBytes ?? 4 * 1024 * 1024;
  return router.post(
    path,
    async (ctx) => {
      const answerError = (error: ConnectError, headers: Record<string, string> = {}) => {
        ctx.record.setCode(error.code);
        ctx.sendJson(CONNECT_CODE_STATUS[error.code], error.toJSON(), { ...headers, ...flatten(error.metadata) });
      };
      let deadline: ReturnType<typeof startDeadline> | undefined;
      try {
        checkUnaryRequest(ctx);
        deadline = startDeadline(parseConnectTimeout(ctx.header("connect-timeout-ms")), ctx.signal);
        const bytes = await ctx.readBytes(maxMessageBytes);
        const request = parseMessage<Req>(bytes);
        const call = makeCall(ctx, deadline);
        const expired = new Promise<never>((_, reject) => deadline!.signal.addEventListener("abort", () => reject(deadline!.signal.reason), { once: true }));
        expired.catch(() => undefined);
        const response = await Promise.race([Promise.resolve(handler(request, call)), expired]);
        ctx.record.setCode("ok");
        ctx.sendJson(200, response ?? {}, call.responseHeaders);
      } catch (error) {
        if (ctx.res.headersSent) return;
        if (error instanceof HttpError && error.status === 415) throw error; // the protocol answers a bare 415
        answerError(toConnectError(error, ctx));
      } finally {
        deadline?.dispose();
      }
    },
    { errorEnvelope: connectErrorEnvelope, bodyLimit: maxMessageBytes },
  );
}

/** Registers `POST <path>` as a Connect server-streaming method with the JSON codec. */
export function connectServerStream<Req = unknown, Res = unknown>(router: Router, path: string, handler: ConnectServerStreamHandler<Req, Res>, options: ConnectRouteOptions = {}): Router {
  const maxMessageBytes = options.maxMessageBytes ?? 4 * 1024 * 1024;
  return router.post(
    path,
    async (ctx) => {
      const { res } = ctx;
      let deadline: ReturnType<typeof startDeadline> | undefined;
      let ended = false;
      let hanging = false;
      let sent = 0;
      const trailers: Record<string, string[]> = {};
      const responseHeaders: Record<string, string> = {};
      const drop = ctx.takeFault("drop-stream");

      const open = () => {
        if (res.headersSent) return;
        res.writeHead(200, { ...responseHeaders, "content-type": "application/connect+json" });
        flushHeaders(res);
      };
      const end = (error?: ConnectError) => {
        if (ended) return;
        ended = true;
        open();
        ctx.record.setCode(error ? error.code : "ok");
        const metadata = { ...trailers, ...(error ? mapValues(error.metadata) : {}) };
        const message = { ...(error ? { error: error.toJSON() } : {}), ...(Object.keys(metadata).length ? { metadata } : {}) };
        res.end(encodeEnvelope(FLAG_END_STREAM, JSON.stringify(message)));
      };
      const stream: ConnectServerStream<Res> = {
        send(message) {
          if (ended || hanging) return;
          open();
          const frame = encodeEnvelope(0, JSON.stringify(message));
          ctx.record.messageOut(0); // bytes are counted by the response tap
          sent++;
          if (drop && sent >= (drop.afterMessages ?? 1)) {
            ended = true;
            writeChunk(res, frame, () => ctx.cut()); // cut once the message is on the socket
            return;
          }
          writeChunk(res, frame);
        },
        end,
        hang() {
          hanging = true;
          open();
        },
        get ended() {
          return ended;
        },
      };

      try {
        if (!STREAM_TYPE.test(ctx.header("content-type") ?? "")) {
          throw new HttpError(415, `content-type must be application/connect+json (got ${JSON.stringify(ctx.header("content-type") ?? "")})`);
        }
        deadline = startDeadline(parseConnectTimeout(ctx.header("connect-timeout-ms")), ctx.signal);
        const request = await readSingleRequest<Req>(ctx, maxMessageBytes);
        if (drop && (drop.afterMessages ?? 1) === 0) {
          open();
          ended = true;
          ctx.cut();
          return;
        }
        deadline.signal.addEventListener(
          "abort",
          () => {
            if (!hanging) end(toConnectError(deadline!.signal.reason, ctx));
          },
          { once: true },
        );
        const call = makeCall(ctx, deadline, responseHeaders, trailers);
        await handler(request, stream, call);
        if (!hanging) end();
      } catch (error) {
        if (error instanceof HttpError && error.status === 415) throw error;
        // Stream errors travel in the end-stream message with HTTP 200, as clients expect.
        end(toConnectError(error, ctx));
      } finally {
        deadline?.dispose();
      }
    },
    { errorEnvelope: connectErrorEnvelope, bodyLimit: maxMessageBytes },
  );
}

/**
 * Registers `POST <path>` as a Connect client-streaming method with the JSON codec: the request is
 * a stream of enveloped messages (`application/connect+json`), read as they arrive; the answer is
 * the stream framing too: the response message then the end-stream message, or only an end-stream
 * carrying the error, always HTTP 200. Each message is bounded by `maxMessageBytes`, the whole
 * body is not (a client stream may live as long as its caller).
 */
export function connectClientStream<Req = unknown, Res = unknown>(router: Router, path: string, handler: ConnectClientStreamHandler<Req, Res>, options: ConnectRouteOptions = {}): Router {
  const maxMessageBytes = options.maxMessageBytes ?? 4 * 1024 * 1024;
  return router.post(
    path,
    async (ctx) => {
      const { res } = ctx;
      const responseHeaders: Record<string, string> = {};
      const trailers: Record<string, string[]> = {};
      let deadline: ReturnType<typeof startDeadline> | undefined;
      const answer = (message: unknown, error?: ConnectError) => {
        if (res.headersSent) return;
        ctx.record.setCode(error ? error.code : "ok");
        const metadata = { ...trailers, ...(error ? mapValues(error.metadata) : {}) };
        const end = { ...(error ? { error: error.toJSON() } : {}), ...(Object.keys(metadata).length ? { metadata } : {}) };
        const frames = [...(error ? [] : [encodeEnvelope(0, JSON.stringify(message ?? {}))]), encodeEnvelope(FLAG_END_STREAM, JSON.stringify(end))];
        if (!error) ctx.record.messageOut(0);
        ctx.send(200, Buffer.concat(frames), { ...responseHeaders, "content-type": "application/connect+json" });
      };
      try {
        if (!STREAM_TYPE.test(ctx.header("content-type") ?? "")) {
          throw new HttpError(415, `content-type must be application/connect+json (got ${JSON.stringify(ctx.header("content-type") ?? "")})`);
        }
        deadline = startDeadline(parseConnectTimeout(ctx.header("connect-timeout-ms")), ctx.signal);
        const call = makeCall(ctx, deadline, responseHeaders, trailers);
        const expired = new Promise<never>((_, reject) => deadline!.signal.addEventListener("abort", () => reject(deadline!.signal.reason), { once: true }));
        expired.catch(() => undefined);
        const response = await Promise.race([Promise.resolve(handler(requestMessages<Req>(ctx, maxMessageBytes), call)), expired]);
        answer(response);
      } catch (error) {
        if (error instanceof HttpError && error.status === 415) throw error;
        if (ctx.signal.aborted) return; // the client went away: nobody to answer
        answer(undefined, toConnectError(error, ctx));
      } finally {
        deadline?.dispose();
      }
    },
    { errorEnvelope: connectErrorEnvelope, bodyLimit: Number.MAX_SAFE_INTEGER },
  );
}

/** The request messages of a client stream, as they arrive. */
async function* requestMessages<Req>(ctx: HttpContext, maxMessageBytes: number): AsyncGenerator<Req> {
  try {
    for await (const envelope of readEnvelopes(ctx.body(), maxMessageBytes)) {
      if (envelope.flags & FLAG_COMPRESSED) throw new ConnectError("unimplemented", "compressed request messages are not supported");
      if (envelope.flags & FLAG_END_STREAM) continue;
      ctx.record.messageIn(0); // bytes already counted by the body reader
      yield parseMessage<Req>(envelope.data);
    }
  } catch (error) {
    if (error instanceof EnvelopeError) throw new ConnectError(error.tooLarge ? "resource_exhausted" : "invalid_argument", error.message);
    throw error;
  }
}

function checkUnaryRequest(ctx: HttpContext): void {
  const type = ctx.header("content-type") ?? "";
  if (!UNARY_TYPE.test(type)) throw new HttpError(415, `content-type must be application/json (got ${JSON.stringify(type)})`);
  const version = ctx.header("connect-protocol-version");
  if (version !== undefined && version !== "1") throw new ConnectError("invalid_argument", `connect-protocol-version must be 1 (got ${JSON.stringify(version)})`);
  const encoding = ctx.header("content-encoding");
  if (encoding !== undefined && encoding !== "identity") throw new ConnectError("unimplemented", `content-encoding ${JSON.stringify(encoding)} is not supported`);
}

async function readSingleRequest<Req>(ctx: HttpContext, maxMessageBytes: number): Promise<Req> {
  let request: Req | undefined;
  let count = 0;
  try {
    for await (const envelope of readEnvelopes(ctx.body(), maxMessageBytes)) {
      if (envelope.flags & FLAG_COMPRESSED) throw new ConnectError("unimplemented", "compressed request messages are not supported");
      if (envelope.flags & FLAG_END_STREAM) continue;
      count++;
      ctx.record.messageIn(0); // bytes already counted by the body reader
      request = parseMessage<Req>(envelope.data);
    }
  } catch (error) {
    if (error instanceof EnvelopeError) throw new ConnectError(error.tooLarge ? "resource_exhausted" : "invalid_argument", error.message);
    throw error;
  }
  if (count !== 1) throw new ConnectError("invalid_argument", `server-streaming call needs exactly one request message (got ${count})`);
  return request as Req;
}

function parseMessage<T>(bytes: Buffer): T {
  if (bytes.length === 0) return {} as T;
  try {
    return JSON.parse(bytes.toString("utf8")) as T;
  } catch (error) {
    throw new ConnectError("invalid_argument", `request message is not valid JSON: ${(error as Error).message}`);
  }
}

function makeCall(ctx: HttpContext, deadline: ReturnType<typeof startDeadline>, responseHeaders: Record<string, string> = {}, trailers: Record<string, string[]> = {}): ConnectCall {
  return {
    ctx,
    signal: deadline.signal,
    deadline: deadline.at,
    timeoutMs: deadline.timeoutMs,
    header: (name) => ctx.header(name),
    responseHeaders,
    trailers,
    shouldDrop: (kind) => ctx.shouldDrop(kind),
  };
}

function toConnectError(error: unknown, ctx: HttpContext): ConnectError {
  if (error instanceof ConnectError) return error;
  if (error instanceof HttpError) return new ConnectError(connectCodeForStatus(error.status), error.message);
  if (ctx.signal.aborted && error === ctx.signal.reason) return new ConnectError("canceled", "request canceled");
  process.stderr.write(`[emulator-kit] Connect ${ctx.route}: ${error instanceof Error ? error.message : String(error)}\n`);
  return new ConnectError("internal", "internal emulator error");
}

const flatten = (metadata: Record<string, string | string[]>) => Object.fromEntries(Object.entries(metadata).map(([key, value]) => [key, Array.isArray(value) ? value.join(", ") : value]));
const mapValues = (metadata: Record<string, string | string[]>) => Object.fromEntries(Object.entries(metadata).map(([key, value]) => [key, Array.isArray(value) ? value : [value]]));
