import type { Readable } from "node:stream";
import type { ContainerProcess, Sandbox } from "modal";
import { scriptSink, TransportLimitError, withInlineEnv, withRemoteGroupKill, type ScriptExit, type ScriptIo, type ScriptRunner, type TransportCapabilities } from "@paperclip-sandbox/kit";

/** Modal refuses an exec whose arguments add up to more than this (ARG_MAX, checked by the SDK too). */
export const MODAL_ARGV_LIMIT = 64 * 1024;
/**
 * What the kit may hand the runner as one script: the argv limit less what goes around a script on
 * its way (`sh -c`, the group-kill wrapper and its quoting, inlined env). The runner still measures
 * the real argv and refuses one over the limit before any call.
 */
export const MODAL_MAX_SCRIPT_BYTES = 60 * 1024;

/** The runner as the kit sees it: streamed stdin with EOF, binary-safe live output, group kill, remote deadline. */
export const MODAL_TRANSPORT: TransportCapabilities = Object.freeze({
  stdin: "stream",
  stdinEof: true,
  binarySafe: true,
  liveOutput: true,
  separateStderr: true,
  signals: "group",
  remoteTimeout: true,
  maxScriptBytes: MODAL_MAX_SCRIPT_BYTES,
});

/**
 * The script rides in this variable rather than in the group-kill wrapper's text: the wrapper
 * writes its script twice (a setsid branch and a fallback), which would halve what fits in Modal's
 * argv. `withInlineEnv` exports it once at the top; the job takes it into a shell variable, unsets
 * the export (so the command's own environment never sees it) and evaluates it.
 */

/** Modal's exec itself: no signal RPC at all (aborts go through `withRemoteGroupKill`). */
const EXEC_CAPABILITIES: TransportCapabilities = Object.freeze({ ...MODAL_TRANSPORT, signals: "none" as const });

/** Modal exec timeouts are whole seconds, at least one: a deadline is rounded up, never down. */
export function execTimeoutSeconds(timeoutMs: number): number {
  return Math.max(1, Math.ceil(timeoutMs / 1000));
}

export interface ModalRunnerOptions {
  /** Turns an SDK failure into the provider's error (redacted, typed). */
  error(operation: string, error: unknown): Error;
  /** Retries a call that certainly did not take effect (Modal's RESOURCE_EXHAUSTED). */
  retry<T>(operation: string, call: () => Promise<T>): Promise<T>;
}

/**
 * The kit's runner contract over Modal's exec (`sandbox.exec(["sh", "-c", script])`): stdin streams
 * in one client-streaming call, stdout and stderr are read live by offset, the exit comes from the
 * long-polled wait. Modal has no signal RPC, so aborts and timeouts end the process group from a
 * second exec (`withRemoteGroupKill`); the env goes inline into the script (`withInlineEnv`: the
 * SDK's exec env travels as a secret source, and the kit's env is the command's own).
 */
export function createModalRunner(sandbox: Sandbox, options: ModalRunnerOptions): ScriptRunner {
  return {
    capabilities: MODAL_TRANSPORT,
    async run(script, io) {
      // A timeout Modal enforced (or the SDK's deadline at the same moment) ends the group like an abort.
      const stop = new AbortController();
      let remoteTimeout = false;
      const relay = () => stop.abort();
      if (io.signal?.aborted) stop.abort();
      else io.signal?.addEventListener("abort", relay, { once: true });
      const exec = execRunner(sandbox, options, () => {
        remoteTimeout = true;
        stop.abort();
      });
      try {
        const exit = await withRemoteGroupKill(withInlineEnv(exec)).run(script, { ...io, signal: stop.signal });
        if (remoteTimeout && !io.signal?.aborted) return { exitCode: null, signal: "SIGKILL", aborted: false, timedOut: true, reason: "timeout" };
        return exit;
      } finally {
        io.signal?.removeEventListener("abort", relay);
      }
    },
  };
}

function argvBytes(argv: readonly string[]): number {
  return argv.reduce((sum, arg) => sum + Buffer.byteLength(arg, "utf8"), 0);
}

/** One exec per run; `onRemoteTimeout` hears of a run that Modal's deadline ended. */
function execRunner(sandbox: Sandbox, options: ModalRunnerOptions, onRemoteTimeout: () => void): ScriptRunner {
  return {
    capabilities: EXEC_CAPABILITIES,
    async run(script, io): Promise<ScriptExit> {
      const hasStdin = io.stdin !== undefined && io.stdin !== null;
      // Without stdin the script reads /dev/null, so no call is spent closing Modal's stdin.
      const argv = ["sh", "-c", hasStdin ? script : `exec </dev/null\n${script}`];
      const size = argvBytes(argv);
      if (size > MODAL_ARGV_LIMIT) {
        throw new TransportLimitError(`modal: this command is ${size} bytes of arguments; Modal's exec takes at most ${MODAL_ARGV_LIMIT} (nothing was sent)`);
      }
      const timeoutMs = io.timeoutMs === undefined ? undefined : execTimeoutSeconds(io.timeoutMs) * 1000;
      const process = await options.retry("execStart", () =>
        sandbox.exec(argv, { mode: "binary", stdout: io.stdout ? "pipe" : "ignore", stderr: io.stderr ? "pipe" : "ignore", ...(timeoutMs ? { timeoutMs } : {}) }),
      );
      const started = Date.now();
      // Stdin ends at its EOF, or when the process has exited (a duplex channel's stdin stays open).
      const exited = new AbortController();
      const feeding = hasStdin ? feedStdin(process, io.stdin!, exited.signal) : Promise.resolve();
      const feedFailed = new Promise<{ feedError: unknown }>((resolve) => feeding.catch((feedError: unknown) => !exited.signal.aborted && resolve({ feedError })));
      const finished = Promise.allSettled([process.wait(), io.stdout ? pump(process.stdout, io.stdout) : undefined, io.stderr ? pump(process.stderr, io.stderr) : undefined]);
      const first = await Promise.race([finished, feedFailed]);
      // Stdin that cannot be delivered leaves the script waiting for it: a transport failure.
      if ("feedError" in first) throw options.error("execStdin", first.feedError);
      exited.abort();
      await feeding.catch(() => undefined); // what a script chose not to read is its business
      const [waited, ...delivered] = first;
      const failures = [waited, ...delivered].filter((r): r is PromiseRejectedResult => r.status === "rejected");

      const deadlinePassed = timeoutMs !== undefined && Date.now() - started >= timeoutMs - 250;
      const code = waited.status === "fulfilled" ? waited.value : null;
      // The SDK keeps Modal's exec deadline on its own calls too: at the deadline they fail, or
      // Modal's kill shows as 137 (SIGKILL) or 124.
      if (deadlinePassed && (failures.some((f) => isDeadlineError(f.reason)) || code === 137 || code === 124)) {
        onRemoteTimeout();
        return { exitCode: null, signal: "SIGKILL", aborted: false, timedOut: true, reason: "timeout" };
      }
      if (failures.length > 0) throw options.error("exec", failures[0]!.reason);
      return { exitCode: code, signal: null, aborted: false, reason: "exit" };
    },
  };
}

function isDeadlineError(error: unknown): boolean {
  return error instanceof Error && /deadline exceeded/i.test(error.message);
}

/** A web stream from the SDK into the kit's sink (back-pressure for a Writable, ended at EOF). */
async function pump(stream: ReadableStream<Uint8Array>, target: NonNullable<ScriptIo["stdout"]>): Promise<void> {
  const sink = scriptSink(target);
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (value) await sink.write(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    }
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw error;
  } finally {
    reader.releaseLock();
  }
  await sink.end();
}

/** Bytes the SDK can (re)read from any offset it asks for: what its resumable stdin stream needs. */
interface StdinSource {
  readFrom(offset: number): AsyncIterable<Uint8Array>;
}

/** Largest stretch of a streamed stdin kept for the SDK to resend after a broken stream. */
const STDIN_REPLAY_BYTES = 8 * 1024 * 1024;

function bytesSource(bytes: Buffer): StdinSource {
  return {
    async *readFrom(offset) {
      if (offset < bytes.length) yield bytes.subarray(offset);
    },
  };
}

/**
 * A Readable read once; the last STDIN_REPLAY_BYTES stay available for a resume. It ends at the
 * stream's end, or when `stop` fires (the process exited), whichever is first.
 */
function streamSource(stream: Readable, stop: AbortSignal): StdinSource {
  const stopped = new Promise<IteratorResult<Buffer | string>>((resolve) => {
    if (stop.aborted) resolve({ done: true, value: undefined });
    else stop.addEventListener("abort", () => resolve({ done: true, value: undefined }), { once: true });
  });
  const iterator = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer | string>;
  const kept: Buffer[] = [];
  let keptFrom = 0;
  let position = 0;
  return {
    async *readFrom(offset) {
      if (offset < keptFrom || offset > position) throw new Error(`stdin cannot be resent from byte ${offset} (kept ${keptFrom}-${position})`);
      let skip = offset - keptFrom;
      for (const chunk of [...kept]) {
        if (skip >= chunk.length) {
          skip -= chunk.length;
          continue;
        }
        yield chunk.subarray(skip);
        skip = 0;
      }
      for (;;) {
        const next = await Promise.race([iterator.next(), stopped]);
        if (next.done) return;
        const chunk = typeof next.value === "string" ? Buffer.from(next.value, "utf8") : next.value;
        if (chunk.length === 0) continue;
        position += chunk.length;
        kept.push(chunk);
        let keptBytes = position - keptFrom;
        while (keptBytes > STDIN_REPLAY_BYTES && kept.length > 1) {
          const dropped = kept.shift()!;
          keptFrom += dropped.length;
          keptBytes -= dropped.length;
        }
        yield chunk;
      }
    },
  };
}

type StreamingProcess = ContainerProcess & { _stdinWriteStream?: (source: StdinSource) => Promise<number> };

/**
 * The script's stdin, then EOF. The SDK's streaming stdin (one client-streaming call that resumes
 * from the server's offset after a transient failure; what its own filesystem writes use) when this
 * SDK has it, else the public writer (one call per chunk and one for EOF).
 */
async function feedStdin(process: ContainerProcess, input: NonNullable<ScriptIo["stdin"]>, stop: AbortSignal): Promise<void> {
  const source = typeof input === "string" ? bytesSource(Buffer.from(input, "utf8")) : Buffer.isBuffer(input) ? bytesSource(input) : streamSource(input as Readable, stop);
  const streaming = (process as StreamingProcess)._stdinWriteStream;
  if (typeof streaming === "function") {
    await streaming.call(process, source);
    return;
  }
  const writer = process.stdin.getWriter();
  try {
    for await (const chunk of source.readFrom(0)) await writer.write(chunk);
    await writer.close();
  } finally {
    writer.releaseLock();
  }
}
