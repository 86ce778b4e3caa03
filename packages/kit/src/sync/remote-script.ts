import type { ConfinedSandboxPath } from "./sandbox-path.js";
import type { SyncErrorCode } from "./errors.js";
import { shellQuote as quote } from "../exec/quote.js";

/**
 * Building blocks of the sandbox-side scripts. They never trust a path the host checked lexically:
 * the script `cd -P`s one component at a time and compares `pwd -P` with the (physically resolved)
 * roots after every step, then acts on a single relative name. A symlink planted anywhere on the way
 * therefore cannot move the operation outside the roots.
 */

/** Written to stderr (followed by a code) when a script refuses to go on; see `refusalIn`. */
const REFUSAL_MARKER = "PAPERCLIP_SYNC_REFUSED";
/** Exit status of a refusal (any non-zero works; this one is easy to spot in logs). */
const REFUSAL_EXIT = 86;

const REFUSAL_CODES: ReadonlySet<SyncErrorCode> = new Set<SyncErrorCode>(["SYNC_PATH_OUTSIDE_ROOT", "SYNC_SOURCE_INVALID", "SYNC_TARGET_INVALID", "SYNC_REMOTE_FAILED"]);

/**
 * Shell functions shared by every script:
 * - `pc_refuse CODE`: report a refusal and exit.
 * - `pc_check_inside`: refuse unless the physical cwd is one of the roots or below one.
 * - `pc_enter DIR CODE`: `cd -P` into DIR (refusing with CODE when that fails), then check.
 * - `pc_enter_or_create DIR`: the same, creating DIR first when nothing (not even a link) is there.
 *   Because the cwd was checked before, a directory is only ever created inside a root.
 */
export function scriptPrologue(roots: readonly string[]): string {
  // Each root is resolved once, up front. After \`cd -P\` the shell's $PWD is the physical path
  // (getcwd), so checks need no \`$(pwd -P)\` subshell: every fork costs about a millisecond.
  if (roots.some((root) => root.includes("\n"))) throw new Error("sync roots cannot contain a newline");
  const resolveRoots = roots.map((root) => `if cd -P ${quote(root)} 2>/dev/null; then pc_roots="$pc_roots$PWD\${pc_nl}"; fi`).join("\n");
  return `unset CDPATH
pc_nl='
'
pc_roots=
${resolveRoots}
pc_refuse() {
  printf '%s %s\\n' '${REFUSAL_MARKER}' "$1" >&2
  exit ${REFUSAL_EXIT}
}
pc_check_inside() {
  pc_here=$PWD
  pc_rest=$pc_roots
  while [ -n "$pc_rest" ]; do
    pc_real=\${pc_rest%%"$pc_nl"*}
    pc_rest=\${pc_rest#*"$pc_nl"}
    [ "$pc_real" = / ] && return 0
    case "$pc_here/" in "$pc_real"/*) return 0 ;; esac
  done
  pc_refuse SYNC_PATH_OUTSIDE_ROOT
}
pc_enter() {
  cd -P "$1" 2>/dev/null || pc_refuse "$2"
  pc_check_inside
}
pc_enter_or_create() {
  if [ ! -e "$1" ] && [ ! -L "$1" ]; then
    mkdir "$1" 2>/dev/null || [ -d "$1" ] || pc_refuse SYNC_REMOTE_FAILED
  fi
  pc_enter "$1" SYNC_REMOTE_FAILED
}
`;
}

export interface EnterOptions {
  /** Create missing directories on the way (sync-in targets); otherwise refuse with `missingCode`. */
  create: boolean;
  /** Also enter the last component (the path is itself a directory to work in). */
  includeName: boolean;
  missingCode: SyncErrorCode;
}

/** Script lines that leave the shell inside the (parent) directory of `target`, checked. */
export function enterPathLines(target: ConfinedSandboxPath, options: EnterOptions): string {
  const components = [...target.parentComponents];
  if (options.includeName && target.name !== "") components.push(target.name);
  const lines = [`pc_enter ${quote(target.root)} ${options.missingCode}`];
  for (const component of components) {
    // "./" keeps a component such as "-x" from being read as an option.
    lines.push(options.create ? `pc_enter_or_create ${quote(`./${component}`)}` : `pc_enter ${quote(`./${component}`)} ${options.missingCode}`);
  }
  return lines.join("\n") + "\n";
}

/** The refusal code a script reported on stderr, if any. */
export function refusalIn(stderrTail: string): SyncErrorCode | undefined {
  const pattern = new RegExp(`${REFUSAL_MARKER} (SYNC_[A-Z_]+)`, "g");
  let found: SyncErrorCode | undefined;
  for (const match of stderrTail.matchAll(pattern)) {
    const code = match[1] as SyncErrorCode;
    if (REFUSAL_CODES.has(code)) found = code;
  }
  return found;
}

/** Remove refusal marker lines from stderr before showing it to people. */
export function withoutRefusalLines(stderrTail: string): string {
  return stderrTail
    .split("\n")
    .filter((line) => !line.startsWith(REFUSAL_MARKER))
    .join("\n");
}
