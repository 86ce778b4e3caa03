/**
 * Host side of exec handles: start or attach over one connection that carries stdin and learns
 * the exit; reads, subscriptions and signals each over a connection of their own, so any number
 * of readers (of this worker or a later one) can follow one command.
 */
import { randomUUID } from "node:crypto";
import { SandboxExecError } from "../errors.js";
import type { ExecExit, ExecHandle, ExecOptions, OutputListener, OutputRead, OutputStreamName, OutputSubscription, ProcessInfo } from "../types.js";
import { Connection, LARGE_REPLY_LIMITS, replyError, request, SupervisorReplyError, SupervisorTransportError, type ControlMessage, type SupervisorChannel } from "./connection.js";
import { FRAME_STDERR, FRAME_STDOUT } from "./protocol.js";
import { exitOf, validOffset, validPid } from "./replies.js";

const STREAM_OF: Record<number, OutputStreamName> = { [FRAME_STDOUT]: "stdout", [FRAME_STDERR]: "stderr" };
/** Most bytes one read() returns (the supervisor sends them in frames of at most 256 KiB). */
const MAX_READ_BYTES = 16 * 1024 * 1024;

function execError(error: SupervisorReplyError): SandboxExecError {
  return new SandboxExecError(error.code, error.message);
}

/** A promise whose rejection counts as handled even when nobody awaits it. */
function settleable<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

class SupervisorExecHandle implements ExecHandle {
  constructor(
    private readonly channel: SupervisorChannel,
    private readonly connection: Connection,
    readonly pid: number,
    private stdinOpen: boolean,
    readonly exited: Promise<ExecExit>,
  ) {}

  async write(data: Buffer | string): Promise<void> {
    if (!this.stdinOpen) throw new SandboxExecError("EPIPE", `stdin of command ${this.pid} is not open (exec with stdin: true, and not closed yet)`);
    await this.connection.sendData(typeof data === "string" ? Buffer.from(data, "utf8") : data);
  }

  async closeStdin(): Promise<void> {
    if (!this.stdinOpen) return;
    this.stdinOpen = false;
    // After the writes still under way: a caller need not wait for them before closing.
    await this.connection.sendAfterData({ op: "stdin-end" });
  }

  read(stream: OutputStreamName, fromOffset = 0, options: { maxBytes?: number } = {}): Promise<OutputRead> {
    return readOutput(this.channel, this.pid, stream, fromOffset, options.maxBytes ?? MAX_READ_BYTES);
  }

  subscribe(from: Partial<Record<OutputStreamName, number>>, listener: OutputListener): OutputSubscription {
    return subscribeOutput(this.channel, this.pid, from, listener);
  }

  async signal(signal: NodeJS.Signals | number, options: { group?: boolean } = {}): Promise<void> {
    try {
      await request(this.channel, { op: "signal", pid: this.pid, signal, group: options.group === true }, ["signalled"]);
    } catch (error) {
      throw error instanceof SupervisorReplyError ? execError(error) : error;
    }
  }

  close(): void {
    this.connection.close();
  }

  markStdinClosed(): void {
    this.stdinOpen = false;
  }
}

/**
 * Opens the handle's connection with `first` (exec or attach) and resolves once the supervisor has
 * said which command it is; null when it knows no such command (attach).
 */
function openHandle(channel: SupervisorChannel, first: Record<string, unknown>, stdinFrom: (reply: ControlMessage) => boolean): Promise<SupervisorExecHandle | null> {
  return new Promise((resolve, reject) => {
    const exit = settleable<ExecExit>();
    let handle: SupervisorExecHandle | null = null;
    let settled = false;
    const connection = new Connection(channel, {
      onControl(message) {
        if (!settled) {
          settled = true;
          if (message.op === "started" || message.op === "attached") {
            const pid = message.op === "started" ? message.pid : (message.process as { pid?: unknown } | undefined)?.pid;
            if (!validPid(pid)) {
              reject(connection.violate("the supervisor named no valid pid for the command"));
              return;
            }
            handle = new SupervisorExecHandle(channel, connection, pid, stdinFrom(message), exit.promise);
            resolve(handle);
          } else if (message.op === "error") {
            const code = String(message.code ?? "EFAIL");
            if (first.op === "attach" && code === "ESRCH") resolve(null);
            else reject(new SandboxExecError(code, String(message.message ?? "the supervisor refused the command")));
            connection.close();
          } else {
            reject(connection.violate(`unexpected reply ${JSON.stringify(message.op.slice(0, 32))} to ${String(first.op)}`));
          }
          return;
        }
        if (message.op !== "exit") {
          connection.violate(`unexpected message ${JSON.stringify(message.op.slice(0, 32))} on the connection of command ${handle?.pid ?? "?"}`);
          return;
        }
        const outcome = exitOf(message);
        if (typeof outcome === "string") {
          connection.violate(outcome);
          return;
        }
        handle?.markStdinClosed();
        exit.resolve(outcome);
      },
      onData() {
        connection.violate(`output frames on the connection of command ${handle?.pid ?? "?"} (output is read or subscribed)`);
      },
      onEnd(error) {
        handle?.markStdinClosed();
        const lost = error ?? new SupervisorTransportError(`the connection to command ${handle?.pid ?? "?"} ended before its exit`);
        if (!settled) {
          settled = true;
          reject(error ?? new SupervisorTransportError(`supervisor closed the connection before answering ${String(first.op)}`));
        }
        exit.reject(lost);
      },
    });
    connection.send(first);
  });
}

export async function startExec(channel: SupervisorChannel, options: ExecOptions): Promise<ExecHandle> {
  const handle = await openHandle(
    channel,
    {
      op: "exec",
      id: randomUUID(),
      ...(options.argv ? { argv: options.argv } : { script: options.script }),
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
      ...(options.tag === undefined ? {} : { tag: options.tag }),
      ...(options.outputLimitBytes === undefined ? {} : { outputLimitBytes: options.outputLimitBytes }),
      stdin: options.stdin === true,
      detached: options.detached === true,
    },
    () => options.stdin === true,
  );
  return handle!;
}

export function attachExec(channel: SupervisorChannel, pid: number): Promise<ExecHandle | null> {
  return openHandle(channel, { op: "attach", pid }, (reply) => (reply.process as { stdinOpen?: unknown } | undefined)?.stdinOpen === true);
}

export function readOutput(channel: SupervisorChannel, pid: number, stream: OutputStreamName, fromOffset: number, maxBytes: number): Promise<OutputRead> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let received = 0;
    let done = false;
    const connection = new Connection(channel, {
      onData(type, payload) {
        if (STREAM_OF[type] !== stream) {
          connection.violate(`output of the other stream in reply to a read of ${stream}`);
          return;
        }
        received += payload.length;
        if (received > maxBytes) {
          connection.violate(`the supervisor sent more output than asked (${maxBytes} bytes)`);
          return;
        }
        parts.push(payload);
      },
      onControl(message) {
        if (done) {
          connection.violate("a second reply to a read");
          return;
        }
        done = true;
        if (message.op === "error") {
          const error = replyError(message);
          reject(new SandboxExecError(error.code, error.message));
        } else if (message.op === "read-done" && validOffset(message.start) && (message.dropped === undefined || validOffset(message.dropped))) {
          resolve({
            data: Buffer.concat(parts, received),
            offset: message.start,
            nextOffset: message.start + received,
            ended: message.ended === true,
            dropped: typeof message.dropped === "number" ? message.dropped : 0,
          });
        } else reject(connection.violate(`unexpected reply ${JSON.stringify(message.op.slice(0, 32))} to read`));
        connection.end();
      },
      onEnd(error) {
        if (!done) reject(error ?? new SupervisorTransportError("supervisor closed the connection during a read"));
      },
    });
    connection.send({ op: "read", pid, stream, offset: fromOffset, maxBytes: Math.min(maxBytes, MAX_READ_BYTES) });
  });
}

export function subscribeOutput(channel: SupervisorChannel, pid: number, from: Partial<Record<OutputStreamName, number>>, listener: OutputListener): OutputSubscription {
  const done = settleable<ExecExit | null>();
  const cursors = new Map<OutputStreamName, number>();
  for (const stream of ["stdout", "stderr"] as const) if (from[stream] !== undefined) cursors.set(stream, from[stream]!);
  let finished = false;
  const finish = (outcome: { exit: ExecExit | null } | { error: Error }) => {
    if (finished) return;
    finished = true;
    if ("error" in outcome) done.reject(outcome.error);
    else done.resolve(outcome.exit);
  };
  const connection = new Connection(channel, {
    onData(type, payload) {
      const stream = STREAM_OF[type];
      if (!stream || !cursors.has(stream)) {
        connection.violate(`output of a stream not subscribed to (${stream ?? type})`);
        return;
      }
      const offset = cursors.get(stream)!;
      cursors.set(stream, offset + payload.length);
      listener.onData(stream, payload, offset);
    },
    onControl(message) {
      const stream = message.stream === "stdout" || message.stream === "stderr" ? message.stream : null;
      if (message.op === "subscribed") return;
      if (message.op === "gap" && stream && cursors.has(stream) && validOffset(message.to) && message.to >= cursors.get(stream)!) {
        const was = cursors.get(stream)!;
        cursors.set(stream, message.to);
        listener.onGap?.(stream, was, message.to);
      } else if (message.op === "eof" && stream && cursors.has(stream) && (message.offset === undefined || validOffset(message.offset))) {
        listener.onEnd?.(stream, typeof message.offset === "number" ? message.offset : cursors.get(stream)!);
      } else if (message.op === "exit") {
        const outcome = exitOf(message);
        if (typeof outcome === "string") connection.violate(outcome);
        else {
          finish({ exit: outcome });
          connection.end();
        }
      } else if (message.op === "error") {
        const error = replyError(message);
        finish({ error: new SandboxExecError(error.code, error.message) });
        connection.close();
      } else {
        connection.violate(`unexpected message ${JSON.stringify(message.op.slice(0, 32))} on a subscription`);
      }
    },
    onEnd(error) {
      finish({ error: error ?? new SupervisorTransportError(`the output subscription of command ${pid} ended before its exit`) });
    },
  });
  connection.send({ op: "subscribe", pid, from });
  return {
    done: done.promise,
    pause: () => connection.pause(),
    resume: () => connection.resume(),
    close: () => {
      finish({ exit: null });
      connection.close();
    },
  };
}

export async function listProcesses(channel: SupervisorChannel): Promise<ProcessInfo[]> {
  const reply = await request(channel, { op: "processes" }, ["processes"], 30_000, LARGE_REPLY_LIMITS);
  if (!Array.isArray(reply.processes)) throw new SupervisorTransportError("the supervisor's process list is not a list");
  return reply.processes.filter((entry): entry is Record<string, unknown> => typeof entry === "object" && entry !== null).map(processInfoFrom);
}

function exitOrNull(exit: Record<string, unknown>): ExecExit | null {
  const outcome = exitOf(exit);
  return typeof outcome === "string" ? null : outcome;
}

function processInfoFrom(entry: Record<string, unknown>): ProcessInfo {
  const exit = entry.exit as Record<string, unknown> | null | undefined;
  const output = (entry.output ?? {}) as Record<string, { start?: unknown; end?: unknown } | undefined>;
  const range = (name: OutputStreamName) => ({ start: Number(output[name]?.start ?? 0), end: Number(output[name]?.end ?? 0) });
  return {
    pid: Number(entry.pid),
    tag: typeof entry.tag === "string" ? entry.tag : null,
    argv: Array.isArray(entry.argv) ? entry.argv.map(String) : null,
    script: typeof entry.script === "string" ? entry.script : null,
    cwd: String(entry.cwd ?? ""),
    detached: entry.detached === true,
    running: entry.running === true,
    exit: exit ? exitOrNull(exit) : null,
    startedAt: Number(entry.startedAt ?? 0),
    stdinOpen: entry.stdinOpen === true,
    output: { stdout: range("stdout"), stderr: range("stderr") },
  };
}

export async function reapProcess(channel: SupervisorChannel, pid: number): Promise<void> {
  try {
    await request(channel, { op: "reap", pid }, ["reaped"]);
  } catch (error) {
    throw error instanceof SupervisorReplyError ? execError(error) : error;
  }
}
