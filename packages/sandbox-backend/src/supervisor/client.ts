/**
 * Host side of the supervisor channel: the kit's `ScriptRunner` over the lease's Unix socket, so the
 * kit's exec and sync run unchanged against the jail. One connection per command; a kill goes over a
 * second connection so it is never stuck behind stdin backpressure on the first.
 */
import net from "node:net";
import { randomUUID } from "node:crypto";
import type { Readable, Writable } from "node:stream";
import { STREAM_TRANSPORT, type ScriptExit, type ScriptIo, type ScriptRunner, type TransportCapabilities } from "@paperclip-sandbox/kit";
import {
  FRAME_CONTROL,
  FRAME_STDERR,
  FRAME_STDIN,
  FRAME_STDOUT,
  createFrameDecoder,
  encodeControl,
  encodeFrame,
} from "./protocol.js";

const STDIN_CHUNK_BYTES = 256 * 1024;

export interface SupervisorPing {
  pid: number;
  expiresAt: number;
  running: number;
}

export interface SupervisorClientOptions {
  socketPath: string;
  /**
   * Subscribes to "the jail is gone" (e.g. bwrap exited during start-up); returns an unsubscribe.
   * A connection made before the supervisor accepts waits in the socket backlog; this ends that wait.
   * (A listener set rather than a shared promise: racing every command against one long-lived
   * promise would pile up reactions on it for the lease's whole life.)
   */
  watchJail?: (onGone: (error: Error) => void) => () => void;
}

export class SupervisorTransportError extends Error {
  override name = "SupervisorTransportError";
}

type Sink = ScriptIo["stdout"];

/** The supervisor meets the whole contract and enforces deadlines itself. */
const SUPERVISOR_TRANSPORT: TransportCapabilities = Object.freeze({ ...STREAM_TRANSPORT, remoteTimeout: true });

export class SupervisorClient implements ScriptRunner {
  readonly capabilities = SUPERVISOR_TRANSPORT;

  constructor(private readonly options: SupervisorClientOptions) {}

  run(script: string, io: ScriptIo = {}): Promise<ScriptExit> {
    return this.runCommand({ script }, io);
  }

  /** Runs an argv directly (no shell); same streaming and kill semantics as `run`. */
  runArgv(argv: string[], io: ScriptIo = {}): Promise<ScriptExit> {
    return this.runCommand({ argv }, io);
  }

  async ping(timeoutMs = 5_000): Promise<SupervisorPing> {
    const reply = await this.request({ op: "ping" }, timeoutMs);
    return { pid: Number(reply.pid), expiresAt: Number(reply.expiresAt), running: Number(reply.running) };
  }

  /** Ends every running command's process group (an operator's Stop); background processes stay. */
  async killAll(graceMs = 250): Promise<void> {
    await this.request({ op: "kill-all", graceMs }, graceMs + 10_000);
  }

  private async kill(id: string, graceMs: number): Promise<void> {
    await this.request({ op: "kill", id, graceMs }, graceMs + 10_000);
  }

  private connect(): net.Socket {
    return net.connect(this.options.socketPath);
  }

  private withJailGuard<T>(work: Promise<T>): Promise<T> {
    const watch = this.options.watchJail;
    if (!watch) return work;
    return new Promise<T>((resolve, reject) => {
      const unsubscribe = watch(reject);
      work.then(
        (value) => {
          unsubscribe();
          resolve(value);
        },
        (error: unknown) => {
          unsubscribe();
          reject(error);
        },
      );
    });
  }

  /** One control request, one control reply. */
  private request(message: Record<string, unknown>, timeoutMs: number): Promise<Record<string, unknown>> {
    const work = new Promise<Record<string, unknown>>((resolve, reject) => {
      const sock = this.connect();
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new SupervisorTransportError(`supervisor did not answer ${String(message.op)} within ${timeoutMs} ms`));
      }, timeoutMs);
      let answered = false;
      const decode = createFrameDecoder((type, payload) => {
        if (type !== FRAME_CONTROL || answered) return;
        answered = true;
        clearTimeout(timer);
        resolve(JSON.parse(payload.toString("utf8")) as Record<string, unknown>);
        sock.end();
      });
      sock.on("data", (chunk: Buffer) => decode(chunk));
      sock.on("error", (error) => {
        clearTimeout(timer);
        if (!answered) reject(new SupervisorTransportError(`supervisor unreachable: ${error.message}`));
      });
      sock.on("close", () => {
        clearTimeout(timer);
        if (!answered) reject(new SupervisorTransportError("supervisor closed the connection without answering"));
      });
      sock.write(encodeControl(message));
    });
    return this.withJailGuard(work);
  }

  private runCommand(command: { script?: string; argv?: string[] }, io: ScriptIo): Promise<ScriptExit> {
    const id = randomUUID();
    const graceMs = io.killGraceMs ?? 250;
    const work = new Promise<ScriptExit>((resolve, reject) => {
      const sock = this.connect();
      let settled = false;
      let aborted = false;
      let pid: number | undefined;
      const finish = (error: Error | null, exit?: ScriptExit) => {
        if (settled) return;
        settled = true;
        io.signal?.removeEventListener("abort", onAbort);
        if (error) reject(error);
        else resolve(exit!);
      };
      const onAbort = () => {
        aborted = true;
        // The exit frame on the main connection arrives once the group is gone.
        this.kill(id, graceMs).catch(() => sock.destroy());
      };

      const decode = createFrameDecoder((type, payload) => {
        if (type === FRAME_STDOUT) deliver(io.stdout, payload, sock);
        else if (type === FRAME_STDERR) deliver(io.stderr, payload, sock);
        else if (type === FRAME_CONTROL) {
          const message = JSON.parse(payload.toString("utf8")) as Record<string, unknown>;
          if (message.op === "started") {
            if (typeof message.pid === "number") pid = message.pid;
          } else if (message.op === "exit") {
            const code = typeof message.code === "number" ? message.code : null;
            const signal = typeof message.signal === "string" ? message.signal : null;
            const wasAborted = aborted || message.aborted === true;
            const timedOut = message.timedOut === true && !wasAborted;
            const reason = wasAborted ? "aborted" : timedOut ? "timeout" : signal ? "signal" : "exit";
            finish(null, { exitCode: code, signal, aborted: wasAborted, timedOut, reason, ...(pid === undefined ? {} : { pid }) });
            sock.end();
          } else if (message.op === "error") {
            // Reported alongside an exit frame (e.g. spawn failure); kept out of the command's output.
          }
        }
      });
      sock.on("data", (chunk: Buffer) => {
        try {
          decode(chunk);
        } catch (error) {
          sock.destroy();
          finish(new SupervisorTransportError(`bad frame from supervisor: ${(error as Error).message}`));
        }
      });
      // After an abort, losing the connection means the jail was ended under the command (release
      // kills the whole jail and confirms it): that is the aborted outcome, not a transport failure.
      const lost = (message: string) =>
        aborted
          ? finish(null, { exitCode: null, signal: "SIGKILL", aborted: true, reason: "aborted" })
          : finish(new SupervisorTransportError(message));
      sock.on("error", (error) => lost(`supervisor connection failed: ${error.message}`));
      sock.on("close", () => lost("supervisor connection lost before the command exited"));

      if (io.signal?.aborted) {
        sock.destroy();
        finish(null, { exitCode: null, signal: null, aborted: true });
        return;
      }
      io.signal?.addEventListener("abort", onAbort, { once: true });
      sock.write(encodeControl({ op: "start", id, ...command, env: io.env, killGraceMs: graceMs, ...(io.timeoutMs ? { timeoutMs: io.timeoutMs } : {}) }));
      sendStdin(sock, io.stdin).catch(() => undefined);
    });
    return this.withJailGuard(work);
  }
}

function deliver(sink: Sink, chunk: Buffer, sock: net.Socket): void {
  if (!sink) return;
  if (typeof sink === "function") {
    sink(chunk);
    return;
  }
  const writable = sink as Writable;
  // Backpressure: a slow consumer (e.g. tar extracting on the host) pauses the supervisor's pipe.
  if (!writable.write(chunk)) {
    sock.pause();
    writable.once("drain", () => sock.resume());
  }
}

async function sendStdin(sock: net.Socket, stdin: ScriptIo["stdin"]): Promise<void> {
  const write = async (chunk: Buffer) => {
    if (sock.destroyed) throw new Error("closed");
    if (!sock.write(encodeFrame(FRAME_STDIN, chunk))) {
      await new Promise<void>((resolve) => {
        const done = () => {
          sock.off("drain", done);
          sock.off("close", done);
          resolve();
        };
        sock.once("drain", done);
        sock.once("close", done);
      });
    }
  };
  if (typeof stdin === "string" || Buffer.isBuffer(stdin)) {
    const bytes = typeof stdin === "string" ? Buffer.from(stdin, "utf8") : stdin;
    for (let offset = 0; offset < bytes.length; offset += STDIN_CHUNK_BYTES) {
      await write(bytes.subarray(offset, offset + STDIN_CHUNK_BYTES));
    }
  } else if (stdin) {
    for await (const chunk of stdin as Readable) {
      await write(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
    }
  }
  if (!sock.destroyed) sock.write(encodeControl({ op: "stdin-end" }));
}
