/**
 * Host side of the supervisor channel for the kit: its `ScriptRunner` over the sandbox's Unix
 * socket, so the kit's exec and sync run unchanged against the jail. One connection per command; a
 * kill goes over a second connection so it is never stuck behind stdin backpressure on the first.
 * (Exec handles and file ops are in exec-client.ts and files-client.ts.)
 */
import net from "node:net";
import { randomUUID } from "node:crypto";
import type { Readable, Writable } from "node:stream";
import { STREAM_TRANSPORT, type ScriptExit, type ScriptIo, type ScriptRunner, type TransportCapabilities } from "@paperclip-sandbox/kit";
import { FRAME_CONTROL, FRAME_STDERR, FRAME_STDIN, FRAME_STDOUT, FrameError, createFrameDecoder, encodeControl, encodeFrame, parseControl, type FrameLimits } from "./protocol.js";
import { reportViolation, request, SupervisorTransportError, type SupervisorChannel } from "./connection.js";
import { exitOf, validPid } from "./replies.js";

/** A command's connection carries its output and a few small control messages (started, error, exit). */
const RUNNER_REPLY_LIMITS: FrameLimits = { maxControlBytes: 64 * 1024, types: new Set([FRAME_CONTROL, FRAME_STDOUT, FRAME_STDERR]) };

export { SupervisorTransportError } from "./connection.js";

const STDIN_CHUNK_BYTES = 256 * 1024;

export interface SupervisorPing {
  pid: number;
  running: number;
}

export type SupervisorClientOptions = SupervisorChannel;

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
    const reply = await request(this.options, { op: "ping" }, ["pong"], timeoutMs);
    return { pid: Number(reply.pid), running: Number(reply.running) };
  }

  /** Ends every running command's process group (an operator's Stop); background processes stay. */
  async killAll(graceMs = 250): Promise<void> {
    await request(this.options, { op: "kill-all", graceMs }, ["killed"], graceMs + 10_000);
  }

  private async kill(id: string, graceMs: number): Promise<void> {
    await request(this.options, { op: "kill", id, graceMs }, ["killed"], graceMs + 10_000);
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

      let exited = false;
      const decode = createFrameDecoder((type, payload) => {
        if (exited) throw new FrameError("frames after the exit");
        if (type === FRAME_STDOUT) deliver(io.stdout, payload, sock);
        else if (type === FRAME_STDERR) deliver(io.stderr, payload, sock);
        else {
          const message = parseControl(payload);
          if (message.op === "started") {
            if (!validPid(message.pid) || pid !== undefined) throw new FrameError("a started message without a valid pid, or a second one");
            pid = message.pid;
          } else if (message.op === "exit") {
            const outcome = exitOf(message);
            if (typeof outcome === "string") throw new FrameError(outcome);
            exited = true;
            const wasAborted = aborted || message.aborted === true;
            const timedOut = outcome.timedOut && !wasAborted;
            const reason = wasAborted ? "aborted" : timedOut ? "timeout" : outcome.signal ? "signal" : "exit";
            finish(null, { exitCode: outcome.exitCode, signal: outcome.signal, reason, ...(pid === undefined ? {} : { pid }) });
            sock.end();
          } else if (message.op !== "error") {
            // An error is reported alongside an exit frame (e.g. spawn failure) and kept out of the
            // command's output; anything else has no place on a command's connection.
            throw new FrameError(`unexpected message ${JSON.stringify(message.op.slice(0, 32))} on a command's connection`);
          }
        }
      }, RUNNER_REPLY_LIMITS);
      sock.on("data", (chunk: Buffer) => {
        if (settled && !exited) return;
        try {
          decode(chunk);
        } catch (error) {
          sock.destroy();
          finish(reportViolation(this.options, (error as Error).message));
        }
      });
      // After an abort, losing the connection means the jail was ended under the command (release
      // kills the whole jail and confirms it): that is the aborted outcome, not a transport failure.
      const lost = (message: string) => (aborted ? finish(null, { exitCode: null, signal: "SIGKILL", reason: "aborted" }) : finish(new SupervisorTransportError(message)));
      sock.on("error", (error) => lost(`supervisor connection failed: ${error.message}`));
      sock.on("close", () => lost("supervisor connection lost before the command exited"));

      if (io.signal?.aborted) {
        sock.destroy();
        finish(null, { exitCode: null, signal: null, reason: "aborted" });
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
  // One read can hold many frames: the first that fills the sink waits for its drain, for them all.
  if (!writable.write(chunk) && !sock.isPaused()) {
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
  // Every chunk is split: the supervisor refuses a data frame over MAX_DATA_BYTES (1 MiB), and a
  // stream may hand over larger chunks (a WebSocket message, a file read with a big highWaterMark).
  const writeAll = async (bytes: Buffer) => {
    for (let offset = 0; offset < bytes.length; offset += STDIN_CHUNK_BYTES) {
      await write(bytes.subarray(offset, offset + STDIN_CHUNK_BYTES));
    }
  };
  if (typeof stdin === "string" || Buffer.isBuffer(stdin)) {
    await writeAll(typeof stdin === "string" ? Buffer.from(stdin, "utf8") : stdin);
  } else if (stdin) {
    for await (const chunk of stdin as Readable) {
      await writeAll(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
    }
  }
  if (!sock.destroyed) sock.write(encodeControl({ op: "stdin-end" }));
}
