/**
 * The runner's HTTP server, behind Coder's app proxy (which authenticates the caller and strips its
 * own cookies and token before forwarding): `GET /healthz`, the seed's buffered `POST /run`, and the
 * streamed `GET /stream` WebSocket that the plugin prefers when `/healthz` offers it.
 */
import http from "node:http";
import type { Duplex, Readable } from "node:stream";
import { startCommand, type RunningCommand } from "./process.js";
import { parseEncoding, parseRunRequest, parseStdin, RequestError } from "./request.js";
import {
  MAX_MESSAGE_BYTES,
  message,
  MSG_ERROR,
  MSG_EXIT,
  MSG_SIGNAL,
  MSG_START,
  MSG_STARTED,
  MSG_STDERR,
  MSG_STDIN,
  MSG_STDIN_END,
  MSG_STDOUT,
  OUTPUT_PIECE_BYTES,
  HEALTH_PROTOCOL,
  STREAM_PROTOCOL,
} from "./stream-protocol.js";
import { acceptWebSocket, HandshakeError, refuseUpgrade, type WebSocketConnection } from "./websocket.js";

export interface RunnerOptions {
  /** Where a command runs unless the request names a cwd. */
  defaultCwd: string;
  /** Grace between SIGTERM and SIGKILL of a group at a timeout or abort. */
  killGraceMs: number;
  /** Largest `POST /run` body. */
  maxBodyBytes: number;
  /** Largest stdout or stderr `POST /run` buffers; the rest is dropped and `truncated` set. */
  maxOutputBytes: number;
  /** How long a stream connection may wait before its START message. */
  startWithinMs: number;
}

export const DEFAULT_OPTIONS: Omit<RunnerOptions, "defaultCwd"> = {
  killGraceMs: 2_000,
  maxBodyBytes: 64 * 1024 * 1024,
  maxOutputBytes: 32 * 1024 * 1024,
  startWithinMs: 30_000,
};

/** What `/healthz` says: the plugin uses the stream route only when this names it. */
const HEALTH = { ok: true, protocol: HEALTH_PROTOCOL, stream: STREAM_PROTOCOL, encodings: ["utf8", "base64"] } as const;

export interface RunnerServer {
  server: http.Server;
  /** Ends every running command's group at once (the runner is stopping). */
  killAll(): void;
}

export function createRunnerServer(options: RunnerOptions): RunnerServer {
  const running = new Set<RunningCommand>();
  const server = http.createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://runner").pathname;
    if (path === "/healthz" || path === "/") {
      if (request.method !== "GET" && request.method !== "HEAD") return sendJson(response, 405, { error: "method_not_allowed", message: "use GET" });
      return sendJson(response, 200, HEALTH);
    }
    if (path === "/run") {
      if (request.method !== "POST") return sendJson(response, 405, { error: "method_not_allowed", message: "use POST" });
      void handleRun(request, response, options, running);
      return;
    }
    sendJson(response, 404, { error: "not_found", message: `no route ${path}` });
  });
  server.on("upgrade", (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    const path = new URL(request.url ?? "/", "http://runner").pathname;
    if (path !== "/stream") return refuseUpgrade(socket, 404, `no WebSocket route ${path}`);
    let connection: WebSocketConnection;
    try {
      connection = acceptWebSocket(request, socket, head, { maxMessageBytes: MAX_MESSAGE_BYTES });
    } catch (error) {
      return refuseUpgrade(socket, error instanceof HandshakeError ? error.status : 400, (error as Error).message);
    }
    serveStream(connection, options, running);
  });
  const killAll = () => {
    for (const command of running) command.kill(0);
  };
  // Commands end with the runner.
  server.on("close", killAll);
  return { server, killAll };
}

function sendJson(response: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  response.end(body);
}

async function readBody(request: http.IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) throw new RequestError("body_too_large", `the body is larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** The seed's contract: everything in, everything out, one JSON answer. */
async function handleRun(request: http.IncomingMessage, response: http.ServerResponse, options: RunnerOptions, running: Set<RunningCommand>): Promise<void> {
  let command: RunningCommand | undefined;
  try {
    let body: unknown;
    try {
      body = JSON.parse((await readBody(request, options.maxBodyBytes)).toString("utf8"));
    } catch (error) {
      if (error instanceof RequestError) throw error;
      throw new RequestError("bad_request", "the body must be JSON");
    }
    const run = parseRunRequest(body);
    const record = body as Record<string, unknown>;
    const encoding = parseEncoding(record);
    const stdin = parseStdin(record, encoding);
    command = await start(run, options);
    running.add(command);
    const started = command;
    // A caller that goes away takes its command with it.
    response.on("close", () => {
      if (!response.writableFinished) started.kill();
    });
    started.stdin.end(stdin);
    const stdout = collect(started.stdout, options.maxOutputBytes);
    const stderr = collect(started.stderr, options.maxOutputBytes);
    const exit = await started.exited;
    const out = stdout.result();
    const err = stderr.result();
    sendJson(response, 200, {
      exitCode: exit.exitCode,
      signal: exit.signal,
      timedOut: exit.timedOut,
      stdout: out.bytes.toString(encoding),
      stderr: err.bytes.toString(encoding),
      ...(encoding === "base64" ? { encoding } : {}),
      ...(out.truncated || err.truncated ? { truncated: true } : {}),
    });
  } catch (error) {
    if (error instanceof RequestError) sendJson(response, error.code === "body_too_large" ? 413 : 400, { error: error.code, message: error.message });
    else sendJson(response, 500, { error: "internal", message: (error as Error).message });
  } finally {
    if (command) running.delete(command);
  }
}

async function start(run: ReturnType<typeof parseRunRequest>, options: RunnerOptions): Promise<RunningCommand> {
  try {
    return await startCommand({ script: run.script, env: run.env, cwd: run.cwd ?? options.defaultCwd, timeoutMs: run.timeoutMs, killGraceMs: options.killGraceMs });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new RequestError(code === "ENOENT" ? "cannot_start" : "cannot_start", `the command could not start: ${code ?? (error as Error).message} (does cwd exist?)`);
  }
}

function collect(stream: Readable, limit: number): { result(): { bytes: Buffer; truncated: boolean } } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let truncated = false;
  stream.on("data", (chunk: Buffer) => {
    if (kept >= limit) {
      truncated = true;
      return;
    }
    const piece = chunk.length > limit - kept ? ((truncated = true), chunk.subarray(0, limit - kept)) : chunk;
    chunks.push(piece);
    kept += piece.length;
  });
  return { result: () => ({ bytes: Buffer.concat(chunks, kept), truncated }) };
}

/** One command over one WebSocket, live both ways with back-pressure. */
function serveStream(connection: WebSocketConnection, options: RunnerOptions, running: Set<RunningCommand>): void {
  let command: RunningCommand | undefined;
  let ended = false;
  const waitForStart = setTimeout(() => connection.close(1008, "no START message"), options.startWithinMs);
  const fail = (code: string, text: string) => {
    connection.send(message(MSG_ERROR, { error: code, message: text }));
    connection.close(1000);
  };

  connection.on("close", () => {
    clearTimeout(waitForStart);
    // The caller went away (an abort, a lost connection): the whole group ends.
    if (command && !ended) command.kill();
  });

  connection.on("message", (data: Buffer, binary: boolean) => {
    const type = binary && data.length > 0 ? data[0]! : -1;
    const payload = data.subarray(1);
    if (!command) {
      if (type !== MSG_START) return fail("bad_request", "the first message must be START");
      clearTimeout(waitForStart);
      let request: ReturnType<typeof parseRunRequest>;
      let wantsStdin: boolean;
      try {
        const body = JSON.parse(payload.toString("utf8")) as Record<string, unknown>;
        request = parseRunRequest(body);
        wantsStdin = body.stdin === true;
      } catch (error) {
        return fail(error instanceof RequestError ? error.code : "bad_request", error instanceof RequestError ? error.message : "START must carry a JSON object");
      }
      connection.pause(); // stdin that arrives before the process exists waits in the kernel
      void start(request, options).then(
        (started) => {
          command = started;
          running.add(started);
          connection.send(message(MSG_STARTED, { pid: started.pid }));
          if (!wantsStdin) started.stdin.end();
          forward(started.stdout, MSG_STDOUT);
          forward(started.stderr, MSG_STDERR);
          void started.exited.then((exit) => {
            ended = true;
            running.delete(started);
            connection.send(message(MSG_EXIT, exit));
            connection.close(1000);
          });
          connection.resume();
        },
        (error: unknown) => fail((error as RequestError).code ?? "cannot_start", (error as Error).message),
      );
      return;
    }
    if (type === MSG_STDIN) {
      if (!command.stdin.writableEnded && !command.stdin.write(payload)) {
        connection.pause();
        command.stdin.once("drain", () => connection.resume());
      }
    } else if (type === MSG_STDIN_END) {
      command.stdin.end();
    } else if (type === MSG_SIGNAL) {
      let graceMs = options.killGraceMs;
      try {
        const body = payload.length > 0 ? (JSON.parse(payload.toString("utf8")) as { graceMs?: unknown }) : {};
        if (typeof body.graceMs === "number" && body.graceMs >= 0) graceMs = Math.min(body.graceMs, 60_000);
      } catch {
        // A malformed SIGNAL still ends the command, with the default grace.
      }
      command.kill(graceMs);
    }
  });

  const forward = (stream: Readable, type: number) => {
    stream.on("data", (chunk: Buffer) => {
      for (let at = 0; at < chunk.length; at += OUTPUT_PIECE_BYTES) connection.send(message(type, chunk.subarray(at, at + OUTPUT_PIECE_BYTES)));
      if (!connection.writable()) {
        stream.pause();
        connection.once("drain", () => stream.resume());
      }
    });
  };
}
