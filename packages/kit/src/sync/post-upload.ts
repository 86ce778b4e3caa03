import type { PluginPostUploadCommand } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { SyncError } from "./errors.js";
import type { ResolvedSyncOptions } from "./options.js";
import { enterPathLines, scriptPrologue } from "./remote-script.js";
import { expectSuccess, runScript } from "./run-script.js";
import { confineSandboxPath } from "./sandbox-path.js";

/** The environment variable that carries the opaque command into the sandbox shell. */
export const POST_UPLOAD_COMMAND_ENV = "PAPERCLIP_POST_UPLOAD_COMMAND";

/**
 * Run an operation's post-upload commands in order, stopping at the first failure (non-zero exit,
 * timeout, refused cwd). The command is opaque: it never becomes part of our script text. It travels
 * in an environment variable and is `eval`ed verbatim once the script has `cd -P`ed into `cwd` (default:
 * the first root) and checked that the physical directory is inside a root.
 */
export async function runPostUploadCommands(
  runner: ScriptRunner,
  commands: readonly PluginPostUploadCommand[],
  o: ResolvedSyncOptions,
): Promise<void> {
  for (const [index, command] of commands.entries()) {
    const label = `post-upload command ${index + 1} of ${commands.length}`;
    if (command === null || typeof command !== "object" || typeof command.command !== "string" || command.command.trim() === "") {
      throw new SyncError("SYNC_OPTIONS_INVALID", `${label} has no command`);
    }
    const { timeoutMs } = command;
    if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs <= 0)) {
      throw new SyncError("SYNC_OPTIONS_INVALID", `${label} has an invalid timeoutMs`);
    }
    const cwd = confineSandboxPath(command.cwd ?? (o.roots[0] as string), o.roots, `${label} cwd`);
    const script =
      scriptPrologue(o.roots) +
      enterPathLines(cwd, { create: false, includeName: true, missingCode: "SYNC_REMOTE_FAILED" }) +
      // Leave the command a clean shell: none of our helpers or variables, no copy of itself in env.
      `pc_command=$${POST_UPLOAD_COMMAND_ENV}
unset ${POST_UPLOAD_COMMAND_ENV} pc_nl pc_roots pc_rest pc_here pc_real
unset -f pc_refuse pc_check_inside pc_enter pc_enter_or_create
eval "$pc_command"
`;
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
