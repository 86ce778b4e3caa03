import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { shellQuote } from "../../exec/quote.js";
import { abortedExit, type ScriptExit, type ScriptIo, type ScriptRunner, type TransportCapabilities } from "../../transport.js";
import { scriptSink, type ScriptSink } from "../../transports/script-sink.js";

/**
 * The Kubernetes "channel" exec protocols (`v4.channel.k8s.io`, `v5.channel.k8s.io`): every
 * WebSocket message starts with a channel byte: 0 stdin, 1 stdout, 2 stderr, 3 the exit status
 * (a `metav1.Status` JSON), 4 resize; v5 adds 255 "close channel N" so stdin can half-close.
 */
export const CHANNEL_STDIN = 0;
export const CHANNEL_STDOUT = 1;
export const CHANNEL_STDERR = 2;
export const CHANNEL_STATUS = 3;
export const CHANNEL_CLOSE = 255;
export const CHANNEL_PROTOCOL_V5 = "v5.channel.k8s.io";
export const CHANNEL_PROTOCOL_V4 = "v4.channel.k8s.io";

/** The part of a WebSocket the runner uses (`ws`'s WebSocket has all of it). */
export interface ChannelSocket {
  readonly protocol: string;
  readonly bufferedAmount: number;
  send(data: Buffer, callback?: (error?: Error) => void): void;
  close(code?: number, reason?: string): void;
  terminate?(): void;
  ping?(): void;
  pause?(): void;
  resume?(): void;
  on(event: "close", listener: (code: number) => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  on(event: "pong", listener: () => void): unknown;
}

export interface ChannelConnectRequest {
  /** The argv the server runs (`/bin/sh -c <script>`). */
  command: string[];
  /** Whether a stdin channel is asked for (`stdin=true`). */
  stdin: boolean;
  /** Every message from the server, split into its channel and payload, in arrival order. */
  onFrame(channel: number, payload: Buffer): void;
}

/** What the runner remembers about a server across calls (one per API server). */
export interface ChannelProtocolMemory {
  protocol?: string;
}

export interface ChannelExecRunnerOptions {
  /** Opens the exec WebSocket (resolves once it is open, offering v5 and v4 at least). */
  connect(request: ChannelConnectRequest): Promise<ChannelSocket>;
  /** Shared across the runners of one server: the protocol it negotiated last time. */
  memory?: ChannelProtocolMemory;
  /** Ping interval for the dropped-socket watchdog (default 15 s). */
  pingIntervalMs?: number;
  /** A socket silent this long (no message, no pong) is taken as dropped (default 45 s). */
  silenceLimitMs?: number;
  /** Host directory where stdin of unknown length is spooled when it must be length-framed (default os.tmpdir()). */
  spoolDir?: string;
  /** Without v5, a stdin stream silent this long before its end is a live stream, which cannot be framed (default 5 s). */
  liveStreamIdleMs?: number;
  /**
   * The command travels in the URL's query: past this many bytes (default 8 KiB, under common proxy
   * and server URL limits) the script is sent as the first bytes of stdin and `eval`ed from there.
   */
  maxCommandBytes?: number;
}

/** Thrown (as a rejection) when the exec stream failed: the command's outcome is unknown. */
export class ChannelExecError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = "ChannelExecError";
    this.code = code;
  }
}

/** What the channel exec can do: streamed, binary-safe, live; aborts cannot reach the remote group. */
export const CHANNEL_EXEC_CAPABILITIES: TransportCapabilities = Object.freeze({
  stdin: "stream",
  stdinEof: true,
  binarySafe: true,
  liveOutput: true,
  separateStderr: true,
  signals: "none",
  remoteTimeout: false,
});

const STDIN_CHUNK_BYTES = 256 * 1024;
const SEND_HIGH_WATER_BYTES = 1024 * 1024;

/**
 * A `ScriptRunner` over a channel-protocol exec WebSocket (Kubernetes `pods/exec`, and anything that
 * speaks the same framing). Under v5 stdin is streamed and half-closed with a close frame; under v4
 * (no half-close) stdin is length-framed with `head -c N` (a stream is spooled first to learn N), so
 * the script still sees EOF. The exit code comes from the status channel; every output frame is
 * delivered before the run resolves; a socket that closes before the status, or goes silent past
 * the watchdog's limit, rejects the run. There is no env field (wrap with `withInlineEnv`) and an
 * abort only closes the socket (wrap with `withRemoteGroupKill`).
 */
export function createChannelExecRunner(options: ChannelExecRunnerOptions): ScriptRunner {
  const memory = options.memory ?? {};
  return {
    capabilities: CHANNEL_EXEC_CAPABILITIES,
    async run(script, io) {
      if (io.env && Object.keys(io.env).length > 0) throw new TypeError("channel exec has no environment field: wrap the runner with withInlineEnv");
      if (io.signal?.aborted) return abortedExit();
      const maxCommand = options.maxCommandBytes ?? 8 * 1024;
      const scriptBytes = Buffer.from(script, "utf8");
      // A long script rides ahead of stdin: `head -c N` takes exactly its bytes, the rest is the command's.
      const viaStdin = scriptBytes.length > maxCommand;
      const lead = viaStdin ? `pc_s=$(head -c ${scriptBytes.length}) || exit 126; ` : "";
      const runScript = viaStdin ? `eval "$pc_s"` : `/bin/sh -c ${shellQuote(script)}`;
      const direct = (command: string) => ["/bin/sh", "-c", command];
      const input = io.stdin;
      if (input === undefined || input === null) {
        if (!viaStdin) return runOnce(options, memory, ["/bin/sh", "-c", script], undefined, io);
        return runOnce(options, memory, direct(`${lead}${runScript} </dev/null`), [scriptBytes], io);
      }
      const prefix = viaStdin ? [scriptBytes] : [];
      if (memory.protocol === CHANNEL_PROTOCOL_V5) {
        return runOnce(options, memory, viaStdin ? direct(`${lead}${runScript}`) : ["/bin/sh", "-c", script], [...prefix, input], io);
      }
      // No half-close known to be available: frame stdin so the script sees EOF after N bytes.
      const framed = (length: number) => direct(`${lead}head -c ${length} | ${viaStdin ? `/bin/sh -c "$pc_s"` : runScript}`);
      if (typeof input === "string" || Buffer.isBuffer(input)) {
        const bytes = typeof input === "string" ? Buffer.from(input, "utf8") : input;
        return runOnce(options, memory, framed(bytes.length), [...prefix, bytes], io);
      }
      const dir = await fsp.mkdtemp(path.join(options.spoolDir ?? os.tmpdir(), "paperclip-exec-stdin-"));
      try {
        const file = path.join(dir, "stdin");
        const size = await spool(input as Readable, file, options.liveStreamIdleMs ?? 5_000, memory.protocol ?? "unknown", io.signal);
        return await runOnce(options, memory, framed(size), [...prefix, fs.createReadStream(file)], io);
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    },
  };
}

async function spool(input: Readable, file: string, idleMs: number, protocol: string, signal: AbortSignal | undefined): Promise<number> {
  const out = fs.createWriteStream(file, { mode: 0o600 });
  let size = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      let idle: NodeJS.Timeout | undefined;
      const arm = () => {
        clearTimeout(idle);
        idle = setTimeout(() => {
          cleanup();
          reject(
            new ChannelExecError(
              "CHANNEL_EXEC_NO_HALF_CLOSE",
              `this server's exec protocol (${protocol}) cannot half-close stdin, and stdin has been silent for ${idleMs} ms without ending: a live stream needs ${CHANNEL_PROTOCOL_V5} (Kubernetes 1.30 or later)`,
            ),
          );
        }, idleMs);
      };
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        arm();
        if (!out.write(chunk)) {
          input.pause();
          out.once("drain", () => input.resume());
        }
      };
      const onEnd = () => {
        cleanup();
        out.end(() => resolve());
      };
      const onError = (error: Error) => {
        cleanup();
        reject(error);
      };
      const onAbort = () => {
        cleanup();
        reject(new ChannelExecError("CHANNEL_EXEC_ABORTED", "aborted while reading stdin"));
      };
      const cleanup = () => {
        clearTimeout(idle);
        input.off("data", onData);
        input.off("end", onEnd);
        input.off("error", onError);
        signal?.removeEventListener("abort", onAbort);
      };
      arm();
      input.on("data", onData);
      input.once("end", onEnd);
      input.once("error", onError);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  } catch (error) {
    out.destroy();
    throw error;
  }
  return size;
}

/** The script's sink; while a Writable asks to wait, the socket is paused (back-pressure to the API server). */
function sinkOf(target: ScriptIo["stdout"], socket: () => ChannelSocket | undefined): ScriptSink {
  const sink = scriptSink(target);
  return {
    write(chunk) {
      const waiting = sink.write(chunk);
      if (waiting === undefined) return;
      const s = socket();
      s?.pause?.();
      void waiting.then(() => s?.resume?.());
    },
    end: sink.end,
  };
}

/** The exit code a `metav1.Status` from the status channel reports; throws when the exec itself failed. */
export function exitCodeFromStatus(raw: string): number {
  let status: { status?: string; reason?: string; message?: string; details?: { causes?: Array<{ reason?: string; message?: string }> } };
  try {
    status = JSON.parse(raw);
  } catch {
    throw new ChannelExecError("CHANNEL_EXEC_BAD_STATUS", `the exec status channel sent something that is not JSON (${raw.slice(0, 200)})`);
  }
  if (status.status === "Success") return 0;
  if (status.reason === "NonZeroExitCode") {
    const cause = status.details?.causes?.find((c) => c.reason === "ExitCode");
    const code = Number(cause?.message);
    if (Number.isInteger(code)) return code;
  }
  throw new ChannelExecError("CHANNEL_EXEC_FAILED", `the exec failed to run: ${status.message ?? status.reason ?? raw.slice(0, 200)}`);
}

function runOnce(options: ChannelExecRunnerOptions, memory: ChannelProtocolMemory, command: string[], stdin: Array<Readable | Buffer | string> | undefined, io: ScriptIo): Promise<ScriptExit> {
  return new Promise<ScriptExit>((resolve, reject) => {
    let socket: ChannelSocket | undefined;
    let statusText: string | undefined;
    let settled = false;
    let aborted = false;
    let lastHeard = Date.now();
    const stdout = sinkOf(io.stdout, () => socket);
    const stderr = sinkOf(io.stderr, () => socket);
    const statusParts: Buffer[] = [];
    let watchdog: NodeJS.Timeout | undefined;

    const finish = (outcome: { exit?: ScriptExit; error?: unknown }) => {
      if (settled) return;
      settled = true;
      clearInterval(watchdog);
      io.signal?.removeEventListener("abort", onAbort);
      void Promise.all([stdout.end(), stderr.end()]).then(() => (outcome.error !== undefined ? reject(outcome.error) : resolve(outcome.exit!)));
    };
    const onAbort = () => {
      aborted = true;
      try {
        socket?.close(1000, "aborted");
      } catch {
        /* already closed */
      }
      finish({ exit: abortedExit() });
    };
    io.signal?.addEventListener("abort", onAbort, { once: true });

    const onFrame = (channel: number, payload: Buffer) => {
      lastHeard = Date.now();
      if (channel === CHANNEL_STDOUT) stdout.write(payload);
      else if (channel === CHANNEL_STDERR) stderr.write(payload);
      else if (channel === CHANNEL_STATUS) {
        // The status is the server's last message: settle now and close our side.
        statusParts.push(payload);
        settleFromStatus();
        try {
          socket?.close(1000);
        } catch {
          /* already closing */
        }
      }
      // Other channels (a server's close frame, resize) carry nothing for us.
    };

    function settleFromStatus() {
      statusText = Buffer.concat(statusParts).toString("utf8");
      try {
        const exitCode = exitCodeFromStatus(statusText);
        finish({ exit: { exitCode, signal: null, reason: "exit" } });
      } catch (error) {
        finish({ error });
      }
    }

    options
      .connect({ command, stdin: stdin !== undefined, onFrame })
      .then((opened) => {
        socket = opened;
        if (opened.protocol) memory.protocol = opened.protocol;
        if (aborted || settled) {
          opened.close(1000, "aborted");
          return;
        }
        opened.on("pong", () => (lastHeard = Date.now()));
        opened.on("error", () => undefined);
        opened.on("close", (code) => {
          if (settled) return;
          if (statusParts.length > 0) return settleFromStatus();
          finish({
            error: new ChannelExecError("CHANNEL_EXEC_LOST", `the exec connection closed (code ${code}) before the command's exit status arrived: its outcome is unknown`),
          });
        });
        const ping = options.pingIntervalMs ?? 15_000;
        const limit = options.silenceLimitMs ?? 45_000;
        watchdog = setInterval(
          () => {
            if (Date.now() - lastHeard > limit) {
              opened.terminate ? opened.terminate() : opened.close(4000, "silent");
              finish({ error: new ChannelExecError("CHANNEL_EXEC_LOST", `the exec connection went silent for ${limit} ms (no output, no reply to pings): its outcome is unknown`) });
              return;
            }
            try {
              opened.ping?.();
            } catch {
              /* closing */
            }
          },
          Math.min(ping, limit),
        );
        watchdog.unref?.();
        if (stdin !== undefined) void pumpStdin(opened, stdin).catch((error: unknown) => finish({ error }));
      })
      .catch((error: unknown) => finish({ error }));
  });
}

async function pumpStdin(socket: ChannelSocket, parts: Array<Readable | Buffer | string>): Promise<void> {
  const send = (chunk: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const frame = Buffer.allocUnsafe(chunk.length + 1);
      frame[0] = CHANNEL_STDIN;
      chunk.copy(frame, 1);
      socket.send(frame, (error) => (error ? reject(new ChannelExecError("CHANNEL_EXEC_LOST", `writing stdin failed: ${error.message}`)) : resolve()));
    });
  const sendAll = async (bytes: Buffer) => {
    for (let offset = 0; offset < bytes.length; offset += STDIN_CHUNK_BYTES) {
      const pending = send(bytes.subarray(offset, offset + STDIN_CHUNK_BYTES));
      // Back-pressure: wait for the socket to flush once its buffer passes the high-water mark.
      if (socket.bufferedAmount > SEND_HIGH_WATER_BYTES) await pending;
      else pending.catch(() => undefined);
    }
  };
  for (const stdin of parts) {
    if (typeof stdin === "string" || Buffer.isBuffer(stdin)) await sendAll(typeof stdin === "string" ? Buffer.from(stdin, "utf8") : stdin);
    else for await (const chunk of stdin) await sendAll(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  }
  if (socket.protocol === CHANNEL_PROTOCOL_V5) await new Promise<void>((resolve) => socket.send(Buffer.from([CHANNEL_CLOSE, CHANNEL_STDIN]), () => resolve()));
}
