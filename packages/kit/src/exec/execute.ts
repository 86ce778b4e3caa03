import { StringDecoder } from "node:string_decoder";
import type { PluginEnvironmentExecuteResult } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { buildExecScript, type ExecRequest } from "./script.js";

export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

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
}

export interface TruncationNote {
  keptBytes: number;
  droppedBytes: number;
}

/** Runs one command through a ScriptRunner and shapes the host's execute result. */
export async function executeCommand(
  runner: ScriptRunner,
  req: ExecRequest,
  opts: ExecuteOptions = {},
): Promise<PluginEnvironmentExecuteResult> {
  const script = buildExecScript(req);
  const limit = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const stdout = new OutputCapture("stdout", limit, opts.log);
  const stderr = new OutputCapture("stderr", limit, opts.log);
  const controller = new AbortController();
  const timeoutMs = req.timeoutMs ?? opts.defaultTimeoutMs;
  let timedOut = false;
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, timeoutMs);
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
    });
    const stderrText = stderr.finish();
    const truncated = truncationNotes(stdout, stderr);
    return {
      exitCode: exit.aborted ? null : exit.exitCode,
      signal: exit.aborted ? (exit.signal ?? "SIGTERM") : exit.signal,
      timedOut,
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
    this.log?.(this.stream, text);
  }
}
