import { shellQuote } from "../exec/quote.js";

/** The host's closed set of login command identities (`PluginLoginCommandKey`). */
export type LoginCommandKey = "claude" | "codex" | "grok";

/**
 * The command each key runs, fixed here: the host's open request names a key, never a command.
 * Codex and Grok keep their login state under the session home (`CODEX_HOME`/`GROK_HOME`), where
 * the host reads `auth.json` back; Claude prints its token on the terminal.
 */
export const LOGIN_COMMANDS: Readonly<Record<LoginCommandKey, { command: string; homeVariable?: string }>> = Object.freeze({
  claude: { command: "claude setup-token" },
  codex: { command: "codex login --device-auth", homeVariable: "CODEX_HOME" },
  grok: { command: "grok login --device-auth", homeVariable: "GROK_HOME" },
});

/** The root every session home lives under (the host's `LOGIN_SESSION_HOME_ROOT`). */
export const LOGIN_SESSION_HOME_ROOT = "/tmp/paperclip-adapter-login";
/** Exactly the host's shape: the root, one slash, one lowercase UUID. */
const SESSION_HOME = /^\/tmp\/paperclip-adapter-login\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A refused login request or session home; the message names the field and the rule, never a secret. */
export class LoginPtyError extends Error {
  override name = "LoginPtyError";
  constructor(
    readonly code: "LOGIN_PTY_INVALID_REQUEST" | "LOGIN_PTY_INVALID_SESSION_HOME" | "LOGIN_PTY_HOME_REJECTED" | "LOGIN_PTY_NO_SESSION" | "LOGIN_PTY_UNAVAILABLE",
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

export function isLoginCommandKey(value: unknown): value is LoginCommandKey {
  return value === "claude" || value === "codex" || value === "grok";
}

/** The session home, re-validated exactly as the host validates it before it reaches a shell. */
export function checkSessionHome(value: unknown): string {
  if (typeof value !== "string" || !SESSION_HOME.test(value)) {
    throw new LoginPtyError("LOGIN_PTY_INVALID_SESSION_HOME", `sessionHome must be exactly ${LOGIN_SESSION_HOME_ROOT}/<lowercase uuid>`);
  }
  return value;
}

/** Exit status of the in-sandbox checks when the home is not what it must be. */
export const HOME_REJECTED_EXIT = 86;

/** `__pc_fail`: one line on stderr, exit {@link HOME_REJECTED_EXIT}. */
const FAIL = `__pc_fail() { printf 'LOGIN_PTY_HOME_REJECTED: %s\\n' "$1" >&2; exit ${HOME_REJECTED_EXIT}; }`;

/**
 * Refuses unless `/tmp` and the root are real directories (no link), and the root is ours or
 * root's and nobody else may write it: checked BEFORE anything is made inside it.
 */
function rootChecks(): string[] {
  const root = shellQuote(LOGIN_SESSION_HOME_ROOT);
  return [
    `__pc_uid=$(id -u) || __pc_fail "cannot read the sandbox user's id"`,
    `[ -d /tmp ] && [ ! -L /tmp ] || __pc_fail "/tmp is not a directory"`,
    `[ -d ${root} ] && [ ! -L ${root} ] || __pc_fail "${LOGIN_SESSION_HOME_ROOT} is not a directory"`,
    `__pc_st=$(stat -c '%u %a' ${root}) || __pc_fail "cannot stat ${LOGIN_SESSION_HOME_ROOT}"`,
    `set -- $__pc_st`,
    `[ "$1" = "$__pc_uid" ] || [ "$1" = 0 ] || __pc_fail "${LOGIN_SESSION_HOME_ROOT} belongs to another user"`,
    // group- or world-writable (octal 022 = 18)
    `[ $(( 0$2 & 18 )) -eq 0 ] || __pc_fail "${LOGIN_SESSION_HOME_ROOT} is writable by others"`,
  ];
}

/** Refuses unless the home is a real directory of ours with mode 0700 exactly. */
function homeChecks(home: string): string[] {
  return [
    `[ -d ${shellQuote(home)} ] && [ ! -L ${shellQuote(home)} ] || __pc_fail "the session home is not a directory"`,
    `__pc_st=$(stat -c '%u %a' ${shellQuote(home)}) || __pc_fail "cannot stat the session home"`,
    `set -- $__pc_st`,
    `[ "$1" = "$__pc_uid" ] || __pc_fail "the session home belongs to another user"`,
    `[ "$2" = 700 ] || __pc_fail "the session home's mode is $2, not 700"`,
  ];
}

/** Creates the root (0700 when absent) and the session home as a NEW 0700 directory, then checks both. */
export function sessionHomeScript(home: string): string {
  const checked = checkSessionHome(home);
  const root = shellQuote(LOGIN_SESSION_HOME_ROOT);
  return [
    FAIL,
    `umask 077`,
    `[ -e ${root} ] || [ -L ${root} ] || mkdir -m 0700 ${root} 2>/dev/null || [ -d ${root} ] || __pc_fail "cannot create ${LOGIN_SESSION_HOME_ROOT}"`,
    ...rootChecks(),
    // A new directory: an existing path (a planted link, an earlier session's home) is refused.
    `mkdir -m 0700 ${shellQuote(checked)} 2>/dev/null || __pc_fail "the session home already exists or cannot be created"`,
    ...homeChecks(checked),
    `exit 0`,
  ].join("\n");
}

/**
 * The program the PTY runs: the checks once more, then the key's fixed command in the home, found in
 * `$HOME/.local/bin` first (where Claude Code's own installer puts it, and ahead of the image's
 * PATH as a Debian login shell's `~/.profile` puts it: the sandbox user's own install wins over an
 * image-wide one), then on the sandbox's PATH.
 */
export function loginLaunchScript(key: LoginCommandKey, home: string): string {
  const checked = checkSessionHome(home);
  if (!isLoginCommandKey(key)) throw new LoginPtyError("LOGIN_PTY_INVALID_REQUEST", "loginCommandKey must be one of claude, codex, grok");
  const { command, homeVariable } = LOGIN_COMMANDS[key];
  return [
    FAIL,
    ...rootChecks(),
    ...homeChecks(checked),
    `cd ${shellQuote(checked)} || __pc_fail "cannot enter the session home"`,
    `unset __pc_uid __pc_st`,
    `[ -z "\${HOME:-}" ] || PATH="$HOME/.local/bin:\${PATH:-/usr/bin:/bin}"; export PATH`,
    homeVariable ? `exec env ${homeVariable}=${shellQuote(checked)} ${command}` : `exec ${command}`,
  ].join("\n");
}
