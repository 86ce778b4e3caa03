import { randomBytes } from "node:crypto";
import { shellQuote } from "./quote.js";

export interface ExecRequest {
  /** A program name (looked up on PATH) or path, never a shell line. */
  command: string;
  args?: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Bytes for the command's stdin; the empty string still gives an empty (not absent) stdin. */
  stdin?: string;
  timeoutMs?: number;
}

export interface ExecScriptOptions {
  /** Stage `req.stdin` in a file (default true when stdin is given). */
  stageStdin?: boolean;
  /** Directory for the staging file; default `${TMPDIR:-/tmp}` of the sandbox. */
  stdinDir?: string;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Exit status when the working directory cannot be entered (the command never started). */
export const EXIT_CWD_MISSING = 126;
/** Exit status when stdin could not be staged (the command never started). */
export const EXIT_STDIN_STAGING_FAILED = 125;

/**
 * Builds the `sh -c` script for one command. The script's own stdin carries `req.stdin`; the command
 * is `exec`ed so its exit status and any terminating signal reach the runner unchanged.
 */
export function buildExecScript(req: ExecRequest, opts: ExecScriptOptions = {}): string {
  const lines: string[] = [];
  if (req.cwd !== undefined) lines.push(changeDirectory(req.cwd));
  const staging = req.stdin !== undefined && opts.stageStdin !== false;
  if (staging) lines.push(...stageStdin(opts.stdinDir));
  for (const [key, value] of Object.entries(req.env ?? {})) {
    if (!ENV_NAME.test(key)) throw new Error(`invalid environment variable name: ${JSON.stringify(key)}`);
    lines.push(`export ${key}=${shellQuote(value)}`);
  }
  const argv = [req.command, ...(req.args ?? [])].map(shellQuote).join(" ");
  const input = staging ? "<&3 3<&-" : req.stdin !== undefined ? "" : "</dev/null";
  lines.push(`exec ${argv} ${input}`.trimEnd());
  return lines.join("\n");
}

function changeDirectory(cwd: string): string {
  const dir = shellQuote(cwd);
  return `cd -- ${dir} 2>/dev/null || { printf 'paperclip: working directory %s does not exist or is not accessible\\n' ${dir} >&2; exit ${EXIT_CWD_MISSING}; }`;
}

/**
 * Copies the script's stdin into a 0600 file, opens it as fd 3 and unlinks it before the command
 * starts: nothing is left on disk afterwards even if the command is killed, and the command still
 * sees a regular, seekable file with a real EOF (some CLIs refuse a pipe or never see EOF over a
 * remote transport). A trap removes the file if the script itself is interrupted while staging.
 */
function stageStdin(stdinDir: string | undefined): string[] {
  const dir = stdinDir === undefined ? `"\${TMPDIR:-/tmp}"` : shellQuote(stdinDir);
  const fail = `{ echo 'paperclip: could not stage stdin' >&2; exit ${EXIT_STDIN_STAGING_FAILED}; }`;
  // An unguessable name from the host plus noclobber (O_EXCL) under umask 077 replaces mktemp: the
  // file is created 0600 by this script or not at all, and staging costs two forks (cat, rm), not four.
  const name = `.paperclip-stdin.${randomBytes(12).toString("hex")}`;
  return [
    `__pc_stdin=${dir}/${name}`,
    `trap 'rm -f -- "$__pc_stdin"' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM`,
    `(umask 077 && set -C && exec cat >"$__pc_stdin") && exec 3<"$__pc_stdin"; __pc_status=$?; rm -f -- "$__pc_stdin"; trap - EXIT HUP INT TERM`,
    `[ "$__pc_status" -eq 0 ] || ${fail}`,
    `unset __pc_stdin __pc_status`,
  ];
}
