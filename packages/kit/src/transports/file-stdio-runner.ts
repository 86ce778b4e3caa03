import { abortedExit, timedOutExit, type FileTransport, type ScriptRunner, type TransportCapabilities } from "../transport.js";
import { deliverAll } from "./collect.js";
import { INLINE_STDIN_BYTES, stageStdin } from "./staged-stdin.js";
import { demuxOutput, muxScript, newMuxNonce } from "./stdio-mux.js";

/** A vendor exec without stdin whose stdout and stderr come back as one output. */
export interface CombinedExecRequest {
  /** A POSIX shell script to run as the sandbox user. */
  command: string;
  timeoutMs: number | undefined;
  signal: AbortSignal;
}

export interface CombinedExecResponse {
  exitCode: number | null;
  output: Buffer | string;
  timedOut?: boolean;
}

export interface FileStdioRunnerOptions {
  exec(request: CombinedExecRequest): Promise<CombinedExecResponse>;
  /** The vendor's file API: stdin above the inline limit is uploaded (one more call). */
  files?: FileTransport;
  /** Stdin up to this size rides inside the script itself (one call in all). Default 48 KiB. */
  inlineStdinBytes?: number;
  /** Sandbox directory for scratch files; default `${TMPDIR:-/tmp}` (inline) and `/tmp` (uploads). */
  scratchDir?: string;
  /** The vendor's command-size limit, if any (the wrapper and inline stdin must fit under it). */
  maxCommandBytes?: number;
  /** The vendor enforces `timeoutMs` itself. */
  remoteTimeout?: boolean;
  /** What an abort reaches at the vendor; default "none" (wrap with `withRemoteGroupKill`). */
  signals?: TransportCapabilities["signals"];
}

/** Bytes of wrapper around a script (markers, redirections, scratch handling). */
const WRAPPER_OVERHEAD_BYTES = 1024;

/**
 * A full ScriptRunner over an exec API that has no stdin and merges stdout with stderr (Daytona's
 * `process/execute`, exe.dev's HTTPS exec): stdout, stderr and the exit status travel back base64
 * between markers (see stdio-mux.ts), so a plain execute costs one vendor call, and one with large
 * stdin two (upload, then exec). Output is not live.
 */
export function createFileStdioRunner(opts: FileStdioRunnerOptions): ScriptRunner {
  const inlineLimit = opts.inlineStdinBytes ?? INLINE_STDIN_BYTES;
  const maxScriptBytes = opts.maxCommandBytes === undefined ? undefined : Math.max(0, opts.maxCommandBytes - WRAPPER_OVERHEAD_BYTES - Math.ceil((inlineLimit * 4) / 3) - 4096);
  const capabilities: TransportCapabilities = Object.freeze({
    stdin: "buffered",
    stdinEof: true,
    binarySafe: true,
    liveOutput: false,
    separateStderr: true,
    signals: opts.signals ?? "none",
    remoteTimeout: opts.remoteTimeout === true,
    ...(maxScriptBytes === undefined ? {} : { maxScriptBytes }),
    ...(opts.files ? (opts.files.maxUploadBytes === undefined ? {} : { maxStdinBytes: opts.files.maxUploadBytes }) : { maxStdinBytes: inlineLimit }),
  });

  return {
    capabilities,
    async run(script, io) {
      const signal = io.signal ?? new AbortController().signal;
      const nonce = newMuxNonce();
      const stdin = await stageStdin(io.stdin, { files: opts.files, inlineBytes: inlineLimit, ...(opts.scratchDir ? { scratchDir: opts.scratchDir } : {}), signal });
      const wrapped = muxScript(script, { stdin, env: io.env, ...(opts.scratchDir ? { scratchDir: opts.scratchDir } : {}) }, nonce);
      if (signal.aborted) return abortedExit();
      let response: CombinedExecResponse;
      try {
        response = await opts.exec({ command: wrapped.command, timeoutMs: capabilities.remoteTimeout ? io.timeoutMs : undefined, signal });
      } catch (error) {
        if (signal.aborted) return abortedExit("SIGKILL");
        throw error;
      }
      if (response.timedOut) return timedOutExit();
      const parsed = demuxOutput(response.output, nonce);
      await deliverAll(io.stdout, parsed.stdout);
      await deliverAll(io.stderr, parsed.stderr);
      return { exitCode: parsed.exitCode, signal: null, reason: "exit" };
    },
  };
}
