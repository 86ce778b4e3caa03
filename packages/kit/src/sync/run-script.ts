import type { ScriptExit, ScriptIo, ScriptRunner } from "../transport.js";
import { BoundedTail } from "./bounded-tail.js";
import { SyncError, describeStderrTail, type SyncErrorCode } from "./errors.js";
import { refusalIn, withoutRefusalLines } from "./remote-script.js";

export interface RunScriptOptions {
  stdin?: ScriptIo["stdin"];
  stdout?: ScriptIo["stdout"];
  env?: Record<string, string>;
  /** The caller's signal (`SyncOptions.signal`): its abort becomes SYNC_ABORTED. */
  outerSignal?: AbortSignal | undefined;
  /** Aborted by the caller when a limit is crossed (e.g. too many outbound bytes). */
  limitSignal?: AbortSignal;
  /** Ends the script after this many milliseconds. */
  timeoutMs?: number | undefined;
  maxStderrBytes: number;
}

type AbortCause = "aborted" | "limit" | "timeout";

export interface ScriptOutcome {
  exit: ScriptExit;
  stderrTail: string;
  /** Why the script was ended early, if it was. */
  abortCause: AbortCause | undefined;
}

/**
 * Run one sandbox script with a bounded stderr capture and the three ways of ending it early
 * (caller abort, limit, timeout) folded into one signal for the runner. A runner rejection is a
 * transport failure; everything else is returned for the caller to judge.
 */
export async function runScript(runner: ScriptRunner, script: string, opts: RunScriptOptions): Promise<ScriptOutcome> {
  const stderr = new BoundedTail(opts.maxStderrBytes);
  const timeout = new AbortController();
  const timer = opts.timeoutMs !== undefined && opts.timeoutMs > 0 ? setTimeout(() => timeout.abort(), opts.timeoutMs) : undefined;
  const signals = [timeout.signal, opts.outerSignal, opts.limitSignal].filter((s): s is AbortSignal => s !== undefined);
  const io: ScriptIo = {
    stdin: opts.stdin ?? null,
    stderr: stderr.push,
    signal: AbortSignal.any(signals),
  };
  if (opts.stdout !== undefined) io.stdout = opts.stdout;
  if (opts.env !== undefined) io.env = opts.env;
  let exit: ScriptExit;
  try {
    if (opts.outerSignal?.aborted) throw new SyncError("SYNC_ABORTED", "sync aborted");
    exit = await runner.run(script, io);
  } catch (error) {
    if (error instanceof SyncError) throw error;
    if (opts.outerSignal?.aborted) throw new SyncError("SYNC_ABORTED", "sync aborted", { cause: error });
    // The transport's own words say why (a job that cannot exec, a lost connection); providers'
    // errors carry no secrets (the lifecycle layer also strips the config's from what the host sees).
    const reason = error instanceof Error && error.message ? `: ${error.message.split("\n")[0]!.slice(0, 500)}` : "";
    throw new SyncError("SYNC_TRANSPORT_FAILED", `the sandbox runner failed${reason}`, { cause: error });
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
  // The caller's signals say which of them ended it; the exit says when a deadline did (ours, or the runner's own).
  const abortCause: AbortCause | undefined = opts.outerSignal?.aborted
    ? "aborted"
    : opts.limitSignal?.aborted
      ? "limit"
      : exit.reason === "timeout" || (exit.reason === "aborted" && timeout.signal.aborted)
        ? "timeout"
        : undefined;
  return { exit, stderrTail: stderr.text(), abortCause };
}

/**
 * Throw unless the script exited 0 on its own. A refusal reported by the script keeps its code;
 * any other failure gets `failureCode`. `what` names the step, without secrets.
 */
export function expectSuccess(outcome: ScriptOutcome, what: string, failureCode: SyncErrorCode = "SYNC_REMOTE_FAILED"): void {
  const { exit, stderrTail, abortCause } = outcome;
  if (abortCause === "aborted") throw new SyncError("SYNC_ABORTED", `${what}: aborted`);
  if (exit.exitCode === 0 && abortCause === undefined) return;
  const refusal = refusalIn(stderrTail);
  const shownTail = withoutRefusalLines(stderrTail);
  if (refusal !== undefined) {
    throw new SyncError(refusal, `${what}: refused in the sandbox (${describeRefusal(refusal)})${describeStderrTail(shownTail)}`, {
      exitCode: exit.exitCode,
      stderrTail: shownTail,
    });
  }
  const ended = abortCause === "timeout" ? "timed out" : exit.exitCode === null ? `ended by signal ${exit.signal ?? "unknown"}` : `exited with code ${exit.exitCode}`;
  throw new SyncError(failureCode, `${what} ${ended}${describeStderrTail(shownTail)}`, {
    exitCode: exit.exitCode,
    stderrTail: shownTail,
  });
}

function describeRefusal(code: SyncErrorCode): string {
  switch (code) {
    case "SYNC_PATH_OUTSIDE_ROOT":
      return "the path resolves outside the sync roots";
    case "SYNC_SOURCE_INVALID":
      return "the source is missing or of the wrong kind";
    case "SYNC_TARGET_INVALID":
      return "the target exists with a kind that cannot be replaced";
    default:
      return "a sandbox step failed";
  }
}
