import { proxyTerminal, type Sandbox } from "@cloudflare/sandbox";
import type { Env } from "./env.js";
import { BridgeError, str } from "./http.js";
import { assertLeaseLive, endIfGone } from "./live-lease.js";
import { controlExec, sandboxFor } from "./sandboxes.js";
import { quote } from "./shell.js";
import { EndMarker } from "./end-marker.js";

/** The SDK's terminal frames: binary is terminal bytes both ways; text is JSON control/status. */
const MAX_DIMENSION = 10_000;
/** Longest command the route takes (a launcher line, not a program). */
const MAX_COMMAND_BYTES = 4096;

const dimension = (raw: string | null, field: string): number => {
  if (raw === null || raw === "") return field === "cols" ? 80 : 24;
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_DIMENSION) throw new BridgeError(400, "invalid_request", `${field} must be a whole number from 1 to ${MAX_DIMENSION}.`);
  return Number(raw);
};

const hex = (bytes: number): string => [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");

/**
 * `GET /terminal?providerLeaseId=&command=&cols=&rows=` (a WebSocket upgrade, bearer auth like every
 * route): `command` (a shell command line) on a pseudo-terminal in the lease's sandbox, through the
 * SDK's terminal (`proxyTerminal`, the container's `/ws/pty`). The SDK's PTY runs one program with
 * no arguments and 0.7.21 reports no end, so the bridge stages a 0700 self-deleting wrapper as that
 * program: it runs the command as a job of its own (its own process group, the terminal's
 * foreground: Ctrl-C and group signals reach it, not the wrapper), then prints an end marker with
 * the exit status and a per-terminal nonce. The bridge relays frames both ways, cuts the marker out
 * and answers it with the status frame the SDK defines (`{"type":"exit","code"}`), then closes.
 * Each terminal has a session of its own (the container keeps one PTY per session), deleted when
 * either side closes, which ends whatever still runs on it.
 */
export async function openTerminal(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") throw new BridgeError(426, "upgrade_required", "The terminal is a WebSocket: send an Upgrade: websocket request.");
  const query = new URL(request.url).searchParams;
  const id = str(query.get("providerLeaseId"));
  if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId is required.");
  const command = query.get("command") ?? "";
  if (command.trim() === "" || new TextEncoder().encode(command).length > MAX_COMMAND_BYTES || command.includes("\0")) {
    throw new BridgeError(400, "invalid_request", `command must be a shell command line of 1 to ${MAX_COMMAND_BYTES} bytes.`);
  }
  const cols = dimension(query.get("cols"), "cols");
  const rows = dimension(query.get("rows"), "rows");
  await assertLeaseLive(env, id);

  const sandbox = sandboxFor(env, id);
  const sessionId = `paperclip-pty-${hex(8)}`;
  const nonce = hex(16);
  let upstream: WebSocket;
  try {
    upstream = await startTerminal(sandbox, sessionId, command, nonce, cols, rows);
  } catch (error) {
    // A release that raced the open may have found the old container, and these calls booted a new one.
    await endIfGone(env, id);
    throw error;
  }
  upstream.accept();
  const [client, server] = Object.values(new WebSocketPair()) as [WebSocket, WebSocket];
  server.accept();

  let finished = false;
  const finish = (code: number, reason: string) => {
    if (finished) return;
    finished = true;
    for (const socket of [server, upstream]) {
      try {
        socket.close(code, reason);
      } catch {
        // already closed
      }
    }
    // The session's deletion ends its PTY's process (still running when the client left first).
    ctx.waitUntil(
      (async () => {
        await sandbox.deleteSession(sessionId).catch(() => undefined);
        await endIfGone(env, id);
      })(),
    );
  };

  // Binary messages as ArrayBuffers (the standard default is Blob); a Blob that still comes is read
  // in order with the rest.
  for (const socket of [server, upstream]) trySetArrayBuffer(socket);
  const marker = new EndMarker(nonce);
  const fromSandbox = inOrder();
  upstream.addEventListener("message", (event) =>
    fromSandbox(async () => {
      if (typeof event.data === "string") return void safeSend(server, event.data);
      const { out, exitCode } = marker.scan(await bytesOf(event.data));
      if (out.length > 0) safeSend(server, out);
      if (exitCode !== undefined) {
        safeSend(server, JSON.stringify({ type: "exit", code: exitCode }));
        finish(1000, "exited");
      }
    }),
  );
  const fromClient = inOrder();
  server.addEventListener("message", (event) => fromClient(async () => safeSend(upstream, typeof event.data === "string" ? event.data : await bytesOf(event.data))));
  upstream.addEventListener("close", () => finish(1011, "the sandbox closed the terminal"));
  upstream.addEventListener("error", () => finish(1011, "the sandbox's terminal failed"));
  server.addEventListener("close", () => finish(1000, "client closed"));
  server.addEventListener("error", () => finish(1011, "client failed"));
  return new Response(null, { status: 101, webSocket: client });
}

/** Stages the self-deleting wrapper and opens the SDK's terminal on it: the container's socket. */
async function startTerminal(sandbox: Sandbox, sessionId: string, command: string, nonce: string, cols: number, rows: number): Promise<WebSocket> {
  const wrapper = `/tmp/.paperclip-term-${hex(12)}`;
  const script = ["#!/bin/sh", 'rm -f -- "$0"', "set -m", `/bin/sh -c ${quote(command)}`, `printf '\\033]paperclip-exit;${nonce};%s\\007' "$?"`, ""].join("\n");
  await controlExec(sandbox, `umask 077; set -C; printf '%s' ${quote(script)} > ${quote(wrapper)} && chmod 700 ${quote(wrapper)}`, "Stage the terminal's program");
  const upgrade = new Request("http://localhost/", { headers: { Upgrade: "websocket", Connection: "Upgrade" } });
  let answer: Response;
  try {
    answer = await proxyTerminal(sandbox, sessionId, upgrade, { cols, rows, shell: wrapper });
  } catch (error) {
    await controlExec(sandbox, `rm -f -- ${quote(wrapper)}`, "Remove the terminal's program").catch(() => undefined);
    throw error;
  }
  if (!answer.webSocket) {
    await controlExec(sandbox, `rm -f -- ${quote(wrapper)}`, "Remove the terminal's program").catch(() => undefined);
    throw new BridgeError(502, "terminal_failed", `The sandbox did not open a terminal (HTTP ${answer.status}).`);
  }
  return answer.webSocket;
}

function trySetArrayBuffer(socket: WebSocket): void {
  try {
    (socket as { binaryType?: string }).binaryType = "arraybuffer";
  } catch {
    // a runtime without binaryType delivers ArrayBuffers
  }
}

async function bytesOf(data: unknown): Promise<Uint8Array> {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof Blob) return new Uint8Array(await data.arrayBuffer());
  return new TextEncoder().encode(String(data));
}

/** Runs the given steps one after another, in call order. */
function inOrder(): (step: () => Promise<void>) => void {
  let tail: Promise<void> = Promise.resolve();
  return (step) => {
    tail = tail.then(step).catch(() => undefined);
  };
}

function safeSend(socket: WebSocket, data: string | ArrayBuffer | Uint8Array): void {
  try {
    socket.send(data);
  } catch {
    // the other side is gone; its close event ends the terminal
  }
}
