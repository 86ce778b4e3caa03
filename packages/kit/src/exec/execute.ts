import { StringDecoder } from "node:string_decoder";
import type { PluginEnvironmentExecuteResult } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { buildExecScript, type ExecRequest, type ExecScriptOptions } from "./script.js";

export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/**
 * Largest piece of live output handed to `log` at once. The host caps one `execute.log` chunk at 1 M
 * characters; a buffered transport can deliver megabytes in one callback, so it is split.
 */
export const MAX_LOG_CHUNK_CHARS = 64 * 1024;
/** With a remote deadline, the local backstop fires this much later (the remote side reports first). */
const LOCAL_BACKSTOP_MS = 2_000;

export type OutputStream = "stdout" | "stderr";

export interface ExecuteOptions {
  /** Live output (decoded text), e.g. `ctx.execution.log`. Receives only what is also captured. */
  log?: (stream: OutputStream, text: string) => void;
  /** Captured bytes per stream; the head is kept and the rest counted in `metadata.truncated`. */
  maxOutputBytes?: number;
  /** Used when the request has no `timeoutMs`; absent means no timeout. */
  defaultTimeoutMs?: number;
  killGraceMs?: number;
  /** Rewrites the final stderr (e.g. to append a blocked-network note). */
  annotateStderr?: (stderr: string) => string;
  /** Ends the command early (e.g. an operator stop); the result then has `exitCode: null`. */
  signal?: AbortSignal;
  /** How the script is built (stdin staging directory, ...). */
  script?: ExecScriptOptions;
}

export interface TruncationNote {
  keptBytes: number;
  droppedBytes: number;
}

/** Runs one command through a ScriptRunner and shapes the host's execute result. */
export async function executeCommand(runner: ScriptRunner, req: ExecRequest, opts: ExecuteOptions = {}): Promise<PluginEnvironmentExecuteResult> {
  const script = buildExecScript(req, opts.script);
  const limit = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const stdout = new OutputCapture("stdout", limit, opts.log);
  const stderr = new OutputCapture("stderr", limit, opts.log);
  const controller = new AbortController();
  const timeoutMs = req.timeoutMs ?? opts.defaultTimeoutMs;
  // A transport that enforces deadlines itself gets the deadline; the local timer is then only a
  // backstop for a sandbox side that never answers.
  const remoteDeadline = timeoutMs !== undefined && runner.capabilities.remoteTimeout;
  let timedOut = false;
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => {
            timedOut = true;
            controller.abort();
          },
          remoteDeadline ? timeoutMs + LOCAL_BACKSTOP_MS : timeoutMs,
        );
  const stopFromCaller = () => controller.abort();
  if (opts.signal?.aborted) controller.abort();
  else opts.signal?.addEventListener("abort", stopFromCaller, { once: true });

  const started = performance.now();
  try {
    const exit = await runner.run(script, {
      stdin: req.stdin === undefined ? null : Buffer.from(req.stdin, "utf8"),
      stdout: (chunk) => stdout.push(chunk),
      stderr: (chunk) => stderr.push(chunk),
      signal: controller.signal,
      killGraceMs: opts.killGraceMs,
      ...(remoteDeadline ? { timeoutMs } : {}),
    });
    const stderrText = stderr.finish();
    const truncated = truncationNotes(stdout, stderr);
    // Our own timer ends a run as an abort: that abort is the deadline.
    const reason = exit.reason === "aborted" && timedOut ? "timeout" : exit.reason;
    const ended = reason === "aborted" || reason === "timeout";
    return {
      exitCode: ended ? null : exit.exitCode,
      signal: ended ? (exit.signal ?? "SIGTERM") : exit.signal,
      timedOut: reason === "timeout",
      stdout: stdout.finish(),
      stderr: opts.annotateStderr ? opts.annotateStderr(stderrText) : stderrText,
      metadata: { durationMs: Math.round(performance.now() - started), ...(truncated ? { truncated } : {}) },
    };
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", stopFromCaller);
  }
}

function truncationNotes(...captures: OutputCapture[]): Partial<Record<OutputStream, TruncationNote>> | undefined {
  const notes: Partial<Record<OutputStream, TruncationNote>> = {};
  for (const capture of captures) {
    if (capture.droppedBytes > 0) notes[capture.stream] = { keptBytes: capture.keptBytes, droppedBytes: capture.droppedBytes };
  }
  return Object.keys(notes).length > 0 ? notes : undefined;
}

/** Decodes one stream as UTF-8 (never splitting a character across chunks) and keeps its head. */
class OutputCapture {
  private readonly decoder = new StringDecoder("utf8");
  private readonly parts: string[] = [];
  keptBytes = 0;
  droppedBytes = 0;

  constructor(
    readonly stream: OutputStream,
    private readonly limit: number,
    private readonly log?: (stream: OutputStream, text: string) => void,
  ) {}

  push(chunk: Buffer): void {
    const room = this.limit - this.keptBytes;
    const kept = chunk.length <= room ? chunk : chunk.subarray(0, Math.max(room, 0));
    this.droppedBytes += chunk.length - kept.length;
    if (kept.length === 0) return;
    this.keptBytes += kept.length;
    this.emit(this.decoder.write(kept));
  }

  finish(): string {
    // After a cut the decoder may hold a partial character: drop it rather than emit U+FFFD.
    if (this.droppedBytes === 0) this.emit(this.decoder.end());
    return this.parts.join("");
  }

  private emit(text: string): void {
    if (text.length === 0) return;
    this.parts.push(text);
    if (!this.log) return;
    let start = 0;
    while (start < text.length) {
      let end = Math.min(start + MAX_LOG_CHUNK_CHARS, text.length);
      // Never split a surrogate pair between two notifications.
      if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
      this.log(this.stream, text.slice(start, end));
      start = end;
    }
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
