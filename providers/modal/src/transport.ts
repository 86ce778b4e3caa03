import type { ContainerProcess, Sandbox } from "modal";
import {
  createStreamedProcessRunner,
  STREAM_TRANSPORT,
  TransportLimitError,
  withInlineEnv,
  withRemoteGroupKill,
  type ScriptRunner,
  type StreamedProcessApi,
  type StreamedProcessExit,
  type TransportCapabilities,
} from "@paperclip-sandbox/kit";

/** Modal refuses an exec whose arguments add up to more than this (ARG_MAX, checked by the SDK too). */
export const MODAL_ARGV_LIMIT = 64 * 1024;
/**
 * What the kit may hand the runner as one script: the argv limit less what goes around a script on
 * its way (`sh -c`, the group-kill wrapper and its quoting, inlined env). The adapter still measures
 * the real argv and refuses one over the limit before any call.
 */
export const MODAL_MAX_SCRIPT_BYTES = 60 * 1024;

/** The runner as the kit sees it: the full streamed contract, group kill by a second exec, Modal's own deadline, PTY execs. */
export const MODAL_TRANSPORT: TransportCapabilities = Object.freeze({ ...STREAM_TRANSPORT, remoteTimeout: true, maxScriptBytes: MODAL_MAX_SCRIPT_BYTES, pty: true });

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
 * The kit's runner contract over Modal's exec: the kit's streamed-process runner over
 * `modalProcessApi`. Modal has no signal RPC, so aborts and timeouts end the process group from a
 * second exec (`withRemoteGroupKill`); the env goes inline into the script (`withInlineEnv`: the
 * SDK's exec env travels as a secret source, and the kit's env is the command's own).
 */
export function createModalRunner(sandbox: Sandbox, options: ModalRunnerOptions): ScriptRunner {
  // Stdin is never inlined into the argv: Modal's argv limit is small, and its stdin stream costs one call.
  const exec = createStreamedProcessRunner({ api: modalProcessApi(sandbox, options), signals: "none", remoteTimeout: true, inlineStdinMaxBytes: 0, maxScriptBytes: MODAL_MAX_SCRIPT_BYTES });
  return withRemoteGroupKill(withInlineEnv(exec));
}

/**
 * `sandbox.exec(["/bin/sh", "-c", script])` as the kit's streamed process API: one exec per run,
 * stdout and stderr read live by offset (only when someone reads them), the exit from the
 * long-polled wait, stdin as one resumable client-streaming call, Modal's deadline reported as a
 * timeout.
 */
function modalProcessApi(sandbox: Sandbox, options: ModalRunnerOptions): StreamedProcessApi {
  return {
    async start(spec, output) {
      // Without stdin the script reads /dev/null, so no call is spent closing Modal's stdin.
      const argv = spec.stdin ? spec.argv : [spec.argv[0]!, spec.argv[1]!, `exec </dev/null\n${spec.argv[2]}`, ...spec.argv.slice(3)];
      const size = argv.reduce((sum, arg) => sum + Buffer.byteLength(arg, "utf8"), 0);
      if (size > MODAL_ARGV_LIMIT) {
        throw new TransportLimitError(`modal: this command is ${size} bytes of arguments; Modal's exec takes at most ${MODAL_ARGV_LIMIT} (nothing was sent)`);
      }
      const timeoutMs = spec.timeoutMs === undefined ? undefined : execTimeoutSeconds(spec.timeoutMs) * 1000;
      const process = await options.retry("execStart", () =>
        sandbox.exec(argv, { mode: "binary", stdout: spec.stdout ? "pipe" : "ignore", stderr: spec.stderr ? "pipe" : "ignore", ...(timeoutMs ? { timeoutMs } : {}) }),
      );
      const started = Date.now();
      const exited = (async (): Promise<StreamedProcessExit> => {
        const [waited, ...delivered] = await Promise.allSettled([
          process.wait(),
          spec.stdout ? pump(process.stdout, output.stdout) : undefined,
          spec.stderr ? pump(process.stderr, output.stderr) : undefined,
        ]);
        const failures = [waited, ...delivered].filter((r): r is PromiseRejectedResult => r.status === "rejected");
        const code = waited.status === "fulfilled" ? waited.value : null;
        // The SDK keeps Modal's exec deadline on its own calls too: at the deadline they fail, or
        // Modal's kill shows as 137 (SIGKILL) or 124.
        const deadlinePassed = timeoutMs !== undefined && Date.now() - started >= timeoutMs - 250;
        if (deadlinePassed && (failures.some((f) => isDeadlineError(f.reason)) || code === 137 || code === 124)) return { exitCode: null, signal: "SIGKILL", timedOut: true };
        if (failures.length > 0) throw options.error("exec", failures[0]!.reason);
        return { exitCode: code, signal: null };
      })();
      return {
        exited,
        feedStdin: (source) => feedModalStdin(process, source).catch((error: unknown) => Promise.reject(options.error("execStdin", error))),
      };
    },
  };
}

function isDeadlineError(error: unknown): boolean {
  return error instanceof Error && /deadline exceeded/i.test(error.message);
}

/** A web stream from the SDK into the runner's output (awaited: back-pressure). */
async function pump(stream: ReadableStream<Uint8Array>, deliver: (chunk: Buffer) => void | Promise<void>): Promise<void> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (value) await deliver(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    }
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw error;
  } finally {
    reader.releaseLock();
  }
}

/** Bytes the SDK can (re)read from any offset it asks for: what its resumable stdin stream needs. */
interface StdinSource {
  readFrom(offset: number): AsyncIterable<Uint8Array>;
}

/** Largest stretch of stdin kept for the SDK to resend after a broken stream (a single chunk is always kept whole). */
const STDIN_REPLAY_BYTES = 8 * 1024 * 1024;

/** Chunks read once; the last STDIN_REPLAY_BYTES stay available for a resume. */
function replayable(chunks: AsyncIterable<Buffer>): StdinSource {
  const iterator = chunks[Symbol.asyncIterator]();
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
        const next = await iterator.next();
        if (next.done) return;
        position += next.value.length;
        kept.push(next.value);
        let keptBytes = position - keptFrom;
        while (keptBytes > STDIN_REPLAY_BYTES && kept.length > 1) {
          const dropped = kept.shift()!;
          keptFrom += dropped.length;
          keptBytes -= dropped.length;
        }
        yield next.value;
      }
    },
  };
}

type StreamingProcess = ContainerProcess & { _stdinWriteStream?: (source: StdinSource) => Promise<number> };

/**
 * The script's stdin, then EOF: the SDK's streaming stdin (one client-streaming call that resumes
 * from the server's offset after a transient failure; what its own filesystem writes use) when this
 * SDK has it, else the public writer (one call per chunk and one for EOF).
 */
async function feedModalStdin(process: ContainerProcess, chunks: AsyncIterable<Buffer>): Promise<void> {
  const source = replayable(chunks);
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
