import type { Readable } from "node:stream";
import { abortedExit, timedOutExit, type ScriptIo, type ScriptRunner, type TransportCapabilities } from "../transport.js";
import { scriptSink } from "./script-sink.js";
import { INLINE_STDIN_BYTES } from "./staged-stdin.js";

/** What the runner asks the vendor to start: `sh -c` of the script, as argv. */
export interface StreamedProcessSpec {
  argv: string[];
  /** Extra environment of the process (the vendor's env field), when the kit passes some. */
  env: Record<string, string> | undefined;
  /** Open a stdin pipe; false means stdin is /dev/null (and no stdin calls are made). */
  stdin: boolean;
  /** Someone reads this stream; false: the vendor may discard it (and save the calls that fetch it). */
  stdout: boolean;
  stderr: boolean;
  /** Deadline for the vendor to enforce; only set when the runner declares `remoteTimeout`. */
  timeoutMs: number | undefined;
  /** Aborts the connection only; whether the remote process ends with it is the vendor's. */
  signal: AbortSignal;
}

/** Where the vendor's output events go. A returned promise holds further events (back-pressure). */
export interface StreamedProcessOutput {
  stdout(chunk: Buffer): void | Promise<void>;
  stderr(chunk: Buffer): void | Promise<void>;
}

export interface StreamedProcessExit {
  exitCode: number | null;
  signal: string | null;
  /** The vendor ended the process at `timeoutMs`. */
  timedOut?: boolean;
}

/**
 * Where stdin goes: chunk by chunk through `writeStdin` then `closeStdin` (a call each; the
 * runner merges and paces them), or all of it through `feedStdin`, for a vendor that takes stdin
 * as one stream of its own (e.g. a client-streaming RPC that resends after a broken stream).
 */
type StreamedStdin =
  | {
      /** One vendor call per chunk; rejects when stdin is closed or the process is gone (that ends feeding, as EPIPE would). */
      writeStdin(chunk: Buffer): Promise<void>;
      closeStdin(): Promise<void>;
    }
  | {
      /**
       * Sends every byte of `source`, then EOF; resolves once delivered. `exited` fires when the
       * process has ended (stop reading: a command need not read all of its stdin). A rejection
       * before the process ended fails the run (the script would wait for stdin forever).
       */
      feedStdin(source: AsyncIterable<Buffer>, exited: AbortSignal): Promise<void>;
    };

/** A started remote process. */
export type StreamedProcess = StreamedStdin & {
  /** The process's pid in the sandbox, when the vendor says. */
  readonly pid?: number;
  /** Settles once the process ended and every output event was handed over; rejects if the stream broke. */
  readonly exited: Promise<StreamedProcessExit>;
  /** Signals the process (the vendor reaches its pid; the kit's group kill wraps this runner); absent: no signal API. */
  kill?(signal: "SIGTERM" | "SIGKILL"): Promise<void>;
};

/** A vendor exec API with streamed stdin and output: start, then stdin writes, EOF and signals by pid. */
export interface StreamedProcessApi {
  /** Resolves once the vendor has started the process (its pid is known). */
  start(spec: StreamedProcessSpec, output: StreamedProcessOutput): Promise<StreamedProcess>;
}

export interface StreamedProcessRunnerOptions {
  api: StreamedProcessApi;
  /** What an abort can reach (default `pid`, `none` without `kill`); wrap the runner with `withRemoteGroupKill` for the group. */
  signals?: "pid" | "none";
  /** The vendor enforces `timeoutMs` and says so (default false). */
  remoteTimeout?: boolean;
  /** Stdin bytes per write call at most; writes queued while one is in flight are merged up to this (default 1 MiB). */
  maxStdinChunkBytes?: number;
  /**
   * Stdin known in full up to this size travels inside the command itself, base64 in an argument
   * decoded into the script's stdin, so such an execute is one vendor call instead of three
   * (start, write, close). Default 48 KiB (its base64 stays under Linux's 128 KiB per argument); 0 turns it off.
   */
  inlineStdinMaxBytes?: number;
  /** Largest script one start accepts, when the vendor has a limit. */
  maxScriptBytes?: number;
  /** How long an aborted run waits for the vendor to report the end before it lets go (default 5 s). */
  abortSettleMs?: number;
}

const DEFAULT_STDIN_CHUNK = 1024 * 1024;
const DEFAULT_INLINE_STDIN = INLINE_STDIN_BYTES;
const DEFAULT_KILL_GRACE_MS = 250;
/** Decodes $1 (base64) into the stdin of `sh -c "$2"`; the script's exit status is the pipeline's. */
const INLINE_STDIN_WRAPPER = 'printf %s "$1" | base64 -d | /bin/sh -c "$2"';

/**
 * A `ScriptRunner` over a vendor exec API that streams both ways: stdin through write and close
 * calls (envd's SendInput/CloseStdin, boxd) or one stream of the vendor's own (Modal's resumable
 * stdin), output as events. One execute is one start call: no stdin means no stdin pipe, small
 * known stdin rides inside the command, larger or streamed stdin goes out in merged chunks (one
 * call in flight at a time) and then EOF. Output
 * reaches the sinks as it arrives, in order, with back-pressure for Writable sinks, which are ended
 * at exit. An abort signals the pid (SIGTERM, then SIGKILL after the grace); for the whole group wrap
 * the runner with `withRemoteGroupKill`.
 */
export function createStreamedProcessRunner(opts: StreamedProcessRunnerOptions): ScriptRunner {
  const maxChunk = opts.maxStdinChunkBytes ?? DEFAULT_STDIN_CHUNK;
  const inlineMax = opts.inlineStdinMaxBytes ?? DEFAULT_INLINE_STDIN;
  if (!(maxChunk >= 1)) throw new TypeError("maxStdinChunkBytes: must be at least 1");
  if (!(inlineMax >= 0)) throw new TypeError("inlineStdinMaxBytes: must be 0 or more");
  const capabilities: TransportCapabilities = Object.freeze({
    stdin: "stream",
    stdinEof: true,
    binarySafe: true,
    liveOutput: true,
    separateStderr: true,
    signals: opts.signals ?? "pid",
    remoteTimeout: opts.remoteTimeout ?? false,
    ...(opts.maxScriptBytes !== undefined ? { maxScriptBytes: opts.maxScriptBytes } : {}),
  });

  return {
    capabilities,
    async run(script, io) {
      if (io.signal?.aborted) return abortedExit();
      const known = knownStdin(io.stdin);
      const inline = known !== undefined && known.length > 0 && known.length <= inlineMax;
      // A stream is always streamed (its length is unknown); a buffer only when too large to inline.
      const streamed = known === undefined || (known.length > 0 && !inline);
      const argv = inline ? ["/bin/sh", "-c", INLINE_STDIN_WRAPPER, "sh", known.toString("base64"), script] : ["/bin/sh", "-c", script];

      const connection = new AbortController();
      const stdout = scriptSink(io.stdout);
      const stderr = scriptSink(io.stderr);
      const proc = await opts.api.start(
        {
          argv,
          env: io.env && Object.keys(io.env).length > 0 ? io.env : undefined,
          stdin: streamed,
          stdout: io.stdout !== undefined && io.stdout !== null,
          stderr: io.stderr !== undefined && io.stderr !== null,
          timeoutMs: capabilities.remoteTimeout ? io.timeoutMs : undefined,
          signal: connection.signal,
        },
        { stdout: stdout.write, stderr: stderr.write },
      );

      let aborted = false;
      let graceTimer: NodeJS.Timeout | undefined;
      let letGo: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      const abandoned = new Promise<"abandoned">((resolve) => {
        onAbort = () => {
          aborted = true;
          void proc.kill?.("SIGTERM").catch(() => undefined);
          graceTimer = setTimeout(() => void proc.kill?.("SIGKILL").catch(() => undefined), io.killGraceMs ?? DEFAULT_KILL_GRACE_MS);
          // A vendor that never reports the end must not hold the caller forever.
          letGo = setTimeout(
            () => {
              connection.abort();
              resolve("abandoned");
            },
            (io.killGraceMs ?? DEFAULT_KILL_GRACE_MS) + (opts.abortSettleMs ?? 5_000),
          );
        };
        if (io.signal?.aborted) onAbort();
        else io.signal?.addEventListener("abort", onAbort, { once: true });
      });

      const feeding = streamed ? feedStdin(proc, known ?? (io.stdin as Readable), maxChunk) : undefined;
      try {
        const outcome = await Promise.race([proc.exited, abandoned, ...(feeding ? [feeding.failed] : [])]);
        // A process that exits before its stdin ends (a duplex channel, `head`) is not waited for:
        // the rest of its stdin is read and dropped.
        feeding?.stop();
        await Promise.all([stdout.end(), stderr.end()]);
        if (outcome === "abandoned") return abortedExit("SIGKILL", proc.pid);
        if (aborted) return abortedExit(outcome.signal ?? "SIGTERM", proc.pid);
        if (outcome.timedOut) return timedOutExit(outcome.signal ?? "SIGKILL", proc.pid);
        return { exitCode: outcome.exitCode, signal: outcome.signal, reason: outcome.signal ? "signal" : "exit", pid: proc.pid };
      } finally {
        // The caller's signal may outlive this command (a channel's, a lease's): its abort later
        // must not send kills for a process that is gone (a vendor call, on a lease maybe released).
        if (onAbort) io.signal?.removeEventListener("abort", onAbort);
        if (graceTimer) clearTimeout(graceTimer);
        if (letGo) clearTimeout(letGo);
      }
    },
  };
}

/** The whole stdin when it is already in memory; undefined for a stream (or nothing: an empty buffer). */
function knownStdin(stdin: ScriptIo["stdin"]): Buffer | undefined {
  if (stdin === undefined || stdin === null) return Buffer.alloc(0);
  if (typeof stdin === "string") return Buffer.from(stdin, "utf8");
  if (Buffer.isBuffer(stdin)) return stdin;
  return undefined;
}

interface StdinFeeding {
  /** The process has ended: stop sending (what is left is read and dropped). */
  stop(): void;
  /** Rejects when stdin could not be delivered while the process still ran (never resolves). */
  failed: Promise<never>;
}

/**
 * The one stdin feeder: hands the bytes to the vendor's `feedStdin`, or sends them in order, one
 * write in flight at a time, merging whatever arrived meanwhile up to `maxChunk`, then EOF. A write
 * the vendor refuses (the process exited, or closed its stdin) ends feeding quietly, as EPIPE would.
 */
function feedStdin(proc: StreamedProcess, source: Buffer | Readable, maxChunk: number): StdinFeeding {
  const exited = new AbortController();
  const stop = () => {
    exited.abort();
    if (!Buffer.isBuffer(source)) source.resume();
  };
  if ("feedStdin" in proc) {
    const delivered = proc.feedStdin(chunksOf(source, exited.signal), exited.signal);
    const failed = new Promise<never>((_, reject) => delivered.catch((error: unknown) => !exited.signal.aborted && reject(error)));
    failed.catch(() => undefined);
    return { stop, failed };
  }
  const state = { broken: false };
  void pump(proc, source, maxChunk, state).catch(() => undefined);
  return {
    stop() {
      state.broken = true;
      stop();
    },
    failed: new Promise<never>(() => undefined),
  };
}

/** The bytes of stdin as chunks, ending at its end or when the process has exited. */
async function* chunksOf(source: Buffer | Readable, exited: AbortSignal): AsyncGenerator<Buffer> {
  if (Buffer.isBuffer(source)) {
    if (source.length > 0) yield source;
    return;
  }
  const iterator = source[Symbol.asyncIterator]() as AsyncIterator<Buffer | string>;
  const ended = new Promise<IteratorResult<Buffer | string>>((resolve) => {
    if (exited.aborted) resolve({ done: true, value: undefined });
    else exited.addEventListener("abort", () => resolve({ done: true, value: undefined }), { once: true });
  });
  for (;;) {
    const next = await Promise.race([iterator.next(), ended]);
    if (next.done) return;
    const chunk = typeof next.value === "string" ? Buffer.from(next.value, "utf8") : next.value;
    if (chunk.length > 0) yield chunk;
  }
}

async function pump(
  proc: StreamedProcess & { writeStdin(chunk: Buffer): Promise<void>; closeStdin(): Promise<void> },
  source: Buffer | Readable,
  maxChunk: number,
  state: { broken: boolean },
): Promise<void> {
  const write = async (chunk: Buffer) => {
    if (state.broken || chunk.length === 0) return;
    try {
      await proc.writeStdin(chunk);
    } catch {
      state.broken = true;
    }
  };
  if (Buffer.isBuffer(source)) {
    for (let at = 0; at < source.length && !state.broken; at += maxChunk) await write(source.subarray(at, at + maxChunk));
  } else {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    for await (const raw of source) {
      const chunk = typeof raw === "string" ? Buffer.from(raw, "utf8") : (raw as Buffer);
      if (state.broken) continue;
      pending.push(chunk);
      pendingBytes += chunk.length;
      // Merge what is already buffered in the stream (it arrived while the last write was in flight).
      while (pendingBytes < maxChunk && source.readableLength > 0) {
        const more = source.read(Math.min(source.readableLength, maxChunk - pendingBytes)) as Buffer | string | null;
        if (more === null) break;
        const extra = typeof more === "string" ? Buffer.from(more, "utf8") : more;
        pending.push(extra);
        pendingBytes += extra.length;
      }
      const batch = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      for (let at = 0; at < batch.length && !state.broken; at += maxChunk) await write(batch.subarray(at, at + maxChunk));
    }
  }
  if (!state.broken) await proc.closeStdin().catch(() => undefined);
}
