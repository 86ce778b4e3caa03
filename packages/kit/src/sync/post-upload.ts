import type { PluginPostUploadCommand } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { shellQuote as quote } from "../exec/quote.js";
import { describeStderrTail, SyncError } from "./errors.js";
import { refusalIn, withoutRefusalLines } from "./remote-script.js";
import type { ResolvedSyncOptions } from "./options.js";
import { enterPathLines, scriptPrologue } from "./remote-script.js";
import { expectSuccess, runScript, type ScriptOutcome } from "./run-script.js";
import { confineSandboxPath } from "./sandbox-path.js";

/** The environment variable that carries the opaque command into the sandbox shell. */
export const POST_UPLOAD_COMMAND_ENV = "PAPERCLIP_POST_UPLOAD_COMMAND";

/** Validates one command; returns its label for messages. */
function checkCommand(command: PluginPostUploadCommand, index: number, count: number): string {
  const label = `post-upload command ${index + 1} of ${count}`;
  if (command === null || typeof command !== "object" || typeof command.command !== "string" || command.command.trim() === "") {
    throw new SyncError("SYNC_OPTIONS_INVALID", `${label} has no command`);
  }
  const { timeoutMs } = command;
  if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs <= 0)) {
    throw new SyncError("SYNC_OPTIONS_INVALID", `${label} has an invalid timeoutMs`);
  }
  return label;
}

/**
 * The script that runs one command: `cd -P` into `cwd` (default: the first root), check the physical
 * directory is inside a root, then `eval` the command read from `envName`. The command is opaque: it
 * never becomes part of our script text, and it gets a clean shell (none of our helpers or variables,
 * no copy of itself in env).
 */
function commandScript(command: PluginPostUploadCommand, label: string, o: ResolvedSyncOptions, envName: string): string {
  const cwd = confineSandboxPath(command.cwd ?? (o.roots[0] as string), o.roots, `${label} cwd`);
  return (
    scriptPrologue(o.roots) +
    enterPathLines(cwd, { create: false, includeName: true, missingCode: "SYNC_REMOTE_FAILED" }) +
    `pc_command=$${envName}
unset ${envName} pc_nl pc_roots pc_rest pc_here pc_real
unset -f pc_refuse pc_check_inside pc_enter pc_enter_or_create
eval "$pc_command"
`
  );
}

/**
 * Run an operation's post-upload commands in order, stopping at the first failure (non-zero exit,
 * timeout, refused cwd), one runner call each.
 */
export async function runPostUploadCommands(runner: ScriptRunner, commands: readonly PluginPostUploadCommand[], o: ResolvedSyncOptions): Promise<void> {
  for (const [index, command] of commands.entries()) {
    const label = checkCommand(command, index, commands.length);
    const { timeoutMs } = command;
    const script = commandScript(command, label, o, POST_UPLOAD_COMMAND_ENV);
    const started = Date.now();
    const outcome = await runScript(runner, script, {
      env: { [POST_UPLOAD_COMMAND_ENV]: command.command },
      outerSignal: o.signal,
      timeoutMs,
      maxStderrBytes: o.maxStderrBytes,
      stdout: () => {},
    });
    expectSuccess(outcome, timeoutMs !== undefined && outcome.abortCause === "timeout" ? `${label} (timeout ${timeoutMs} ms)` : label, "SYNC_COMMAND_FAILED");
    o.log(`${label} finished in ${Date.now() - started} ms`);
  }
}

/** Printed to stderr by a folded command that failed: index, status. */
const POST_UPLOAD_FAILED_MARKER = "PAPERCLIP_POST_UPLOAD_FAILED";
/** Extra time a folded script gets beyond the sum of its commands' timeouts. */
const FOLDED_SCRIPT_MARGIN_MS = 60_000;

export interface FoldedPostUpload {
  /** Appended to a transfer's final script: runs every command in order in its own shell. */
  script: string;
  env: Record<string, string>;
  /** For the whole script: the sum of the commands' timeouts (plus a margin), when every command has one. */
  timeoutMs: number | undefined;
  labels: string[];
}

/**
 * The commands as a tail for a transfer's last script, so a transfer over a per-call vendor API does
 * not pay one more call per command. Each command still runs in a fresh `sh` with the same checks,
 * under `timeout` when it has a timeoutMs and the sandbox has `timeout`.
 */
function foldPostUploadCommands(commands: readonly PluginPostUploadCommand[], o: ResolvedSyncOptions): FoldedPostUpload {
  const env: Record<string, string> = {};
  const labels: string[] = [];
  const lines: string[] = [];
  let total = 0;
  let allTimed = true;
  for (const [index, command] of commands.entries()) {
    const label = checkCommand(command, index, commands.length);
    labels.push(label);
    const envName = `${POST_UPLOAD_COMMAND_ENV}_${index + 1}`;
    env[envName] = command.command;
    const script = quote(commandScript(command, label, o, envName));
    const seconds = command.timeoutMs === undefined ? undefined : Math.max(1, Math.ceil(command.timeoutMs / 1000));
    if (command.timeoutMs === undefined) allTimed = false;
    else total += command.timeoutMs;
    const run = seconds === undefined ? `/bin/sh -c ${script}` : `if command -v timeout >/dev/null 2>&1; then timeout ${seconds} /bin/sh -c ${script}; else /bin/sh -c ${script}; fi`;
    // Later commands must not see earlier ones in their environment either.
    const unsetOthers = `unset ${Object.keys(env)
      .filter((name) => name !== envName)
      .join(" ")}`.trimEnd();
    lines.push(
      `(${unsetOthers === "unset" ? "" : `${unsetOthers}; `}${run}) </dev/null >/dev/null || { pc_rc=$?; printf '%s %d %d\\n' '${POST_UPLOAD_FAILED_MARKER}' ${index + 1} "$pc_rc" >&2; exit "$pc_rc"; }`,
    );
  }
  return { script: `${lines.join("\n")}\n`, env, timeoutMs: allTimed && commands.length > 0 ? total + FOLDED_SCRIPT_MARGIN_MS : undefined, labels };
}

/** Which folded command failed, from the script's stderr. */
function foldedFailure(stderrTail: string, folded: FoldedPostUpload): { label: string; status: number } | undefined {
  const match = new RegExp(`${POST_UPLOAD_FAILED_MARKER} (\\d+) (\\d+)`).exec(stderrTail);
  if (!match) return undefined;
  const label = folded.labels[Number(match[1]) - 1];
  return label === undefined ? undefined : { label, status: Number(match[2]) };
}

/** The folded commands of a transfer's last mapping, or nothing. */
export function foldedFor(context: { postUpload?: readonly PluginPostUploadCommand[] }, o: ResolvedSyncOptions): FoldedPostUpload {
  return context.postUpload && context.postUpload.length > 0 ? foldPostUploadCommands(context.postUpload, o) : { script: "", env: {}, timeoutMs: undefined, labels: [] };
}

/** Like `expectSuccess`, but a failed folded command is reported as that command (SYNC_COMMAND_FAILED). */
export function expectFoldedSuccess(outcome: ScriptOutcome, folded: FoldedPostUpload, what: string): void {
  if ((outcome.exit.exitCode !== 0 || outcome.abortCause !== undefined) && outcome.abortCause !== "aborted") {
    const failed = foldedFailure(outcome.stderrTail, folded);
    if (failed) {
      const stderrTail = outcome.stderrTail
        .split("\n")
        .filter((line) => !line.startsWith(POST_UPLOAD_FAILED_MARKER))
        .join("\n");
      const stepOutcome = { ...outcome, stderrTail, exit: { ...outcome.exit, exitCode: failed.status } };
      // A refused cwd keeps its own code; any other failure is the command's.
      if (refusalIn(stderrTail) !== undefined) expectSuccess(stepOutcome, failed.label);
      const ended = failed.status === 124 ? "timed out" : `exited with code ${failed.status}`;
      const shown = withoutRefusalLines(stderrTail);
      throw new SyncError("SYNC_COMMAND_FAILED", `${failed.label} ${ended}${describeStderrTail(shown)}`, { exitCode: failed.status, stderrTail: shown });
    }
  }
  expectSuccess(outcome, what);
}
