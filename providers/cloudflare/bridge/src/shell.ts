/** Shell quoting and the command script the bridge runs in a session (`sh -lc '<script>'`). */

export const quote = (value: string): string => `'${value.replace(/'/g, `'"'"'`)}'`;

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function assertEnvKeys(env: Record<string, string>): void {
  for (const key of Object.keys(env)) if (!ENV_KEY.test(key)) throw new Error(`Invalid sandbox environment variable key: ${key}`);
}

/** Login profiles, each only when present; their output and failures are ignored. */
const PROFILE_STEPS = [
  "if [ -r /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi",
  'if [ -r "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi',
  'if [ -r "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -r "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi',
  'if [ -r "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi',
];

/**
 * Runs "$@" as the leader of a process group of its own (setsid when present) after writing its
 * group id to the file named by $0, and removes that file when the command ends: a timeout can then
 * end the whole group, background children included, from another session.
 */
const GROUP_WRAPPER = 'echo $$ > "$0"; "$@"; s=$?; rm -f "$0"; exit $s';

export interface CommandScript {
  command: string;
  args: string[];
  cwd?: string;
  env: Record<string, string>;
  stdinFile?: string;
  groupFile: string;
}

export function buildCommandScript(spec: CommandScript): string {
  const envPart = Object.entries(spec.env).map(([key, value]) => `${key}=${quote(value)}`);
  const argv = [spec.command, ...spec.args].map(quote);
  const run = [
    "S=; if command -v setsid >/dev/null 2>&1; then S='setsid -w'; fi",
    `exec $S sh -c ${quote(GROUP_WRAPPER)} ${quote(spec.groupFile)} env ${envPart.join(" ")} ${argv.join(" ")}${spec.stdinFile ? ` < ${quote(spec.stdinFile)}` : ""}`,
  ].join("; ");
  const steps = [...PROFILE_STEPS];
  if (spec.cwd) steps.push(`cd ${quote(spec.cwd)} && { ${run}; }`);
  else steps.push(run);
  return steps.join("; ");
}

/** `sh -lc '<script>'`: what the session runs. */
export const loginShell = (script: string): string => `sh -lc ${quote(script)}`;

/** Ends the group recorded in `groupFile` (TERM, then KILL), then removes the file. */
export function killGroupScript(groupFile: string): string {
  const f = quote(groupFile);
  return `pg=$(cat ${f} 2>/dev/null); if [ -n "$pg" ]; then kill -TERM "-$pg" 2>/dev/null || kill -TERM "$pg" 2>/dev/null; sleep 0.25; kill -KILL "-$pg" 2>/dev/null || kill -KILL "$pg" 2>/dev/null; fi; rm -f ${f}; true`;
}

/** Where a streamed process keeps its pipes, its stdin parts and its group id. */
export const processDir = (processId: string): string => `/tmp/.paperclip-bridge-proc-${processId}`;

/** Bytes per output frame: 3000 bytes are 4000 base64 characters, a line under PIPE_BUF. */
const FRAME_BASE64_CHARS = 4000;
/** Bytes one encoder step reads at most (one read(2) of what the pipe holds). */
const ENCODER_READ_BYTES = 49_152;
/** How long output may still drain after the command exited (a background child holding stdout). */
const DRAIN_SECONDS = 1;

/**
 * The encoder: each read of what the pipe holds (up to 48 KiB, one `dd` read) becomes base64 lines of
 * at most 4000 characters, each decodable on its own. The container labels and relays text lines, so
 * every byte arrives unchanged (NULs, invalid UTF-8 and a missing last newline included).
 */
const ENCODER = `__pc_enc() { while __pc_c=$(dd bs=${ENCODER_READ_BYTES} count=1 2>/dev/null | base64 -w ${FRAME_BASE64_CHARS}) && [ -n "$__pc_c" ]; do printf '%s\\n' "$__pc_c"; done; }`;

/**
 * The stdin feeder: the bridge drops stdin parts as files `in.<seq>.<bytes>` (one container write
 * each, not atomic), and `in.<seq>.eof` after the last; the feeder copies each part into the
 * command's stdin pipe once it holds all its bytes, in order, and ends at the eof mark. It polls,
 * backing off from 10 ms to 200 ms while nothing comes.
 */
const FEEDER = [
  `__pc_feed() { __pc_n=0; __pc_i=0`,
  `while :; do`,
  `set -- "$__pc_d"/in."$__pc_n".*`,
  `if [ -e "$1" ]; then`,
  `__pc_l=\${1##*.}`,
  `[ "$__pc_l" = eof ] && break`,
  `if [ "$(wc -c <"$1")" -ge "$__pc_l" ]; then cat -- "$1" || break; rm -f -- "$1"; __pc_n=$((__pc_n + 1)); __pc_i=0; continue; fi`,
  `fi`,
  `__pc_i=$((__pc_i + 1))`,
  `if [ "$__pc_i" -lt 20 ]; then sleep 0.01; elif [ "$__pc_i" -lt 60 ]; then sleep 0.05; else sleep 0.2; fi`,
  `done; }`,
].join("\n");

/**
 * The group wrapper of a streamed process: records its group id, honours a kill that came before it
 * (the `.killed` mark), tells the bridge it runs (`:pid N` on fd 3, the script's own stdout), then
 * runs the command and removes the record.
 */
const PROCESS_WRAPPER = `echo $$ > "$0"; if [ -e "$0.killed" ]; then exit 143; fi; printf ':pid %s\\n' "$$" >&3; exec 3>&-; "$@"; s=$?; rm -f "$0"; exit $s`;

export interface ProcessScript {
  command: string;
  args: string[];
  cwd?: string;
  env: Record<string, string>;
  /** The process directory (`processDir`). */
  dir: string;
  /** Stdin arrives as parts (PUT /exec/{id}/stdin); otherwise it is /dev/null. */
  stdinStream: boolean;
}

/**
 * A streamed process: the command's stdout and stderr go through pipes to two encoders that print
 * base64 lines on the script's own stdout and stderr; its stdin comes from the feeder (or /dev/null).
 * The script's stdout carries `:pid N` once the command runs, the frames, and `:exit N` last, after
 * the encoders drained. Run with `sh -c` (profiles are sourced quietly), so nothing else reaches the
 * script's stdout.
 */
export function buildProcessScript(spec: ProcessScript): string {
  const d = quote(spec.dir);
  const envPart = Object.entries(spec.env).map(([key, value]) => `${key}=${quote(value)}`);
  const argv = [spec.command, ...spec.args].map(quote);
  const group = quote(`${spec.dir}/group`);
  const start = `S=; if command -v setsid >/dev/null 2>&1; then S=setsid; fi; exec $S sh -c ${quote(PROCESS_WRAPPER)} ${group} env ${envPart.join(" ")} ${argv.join(" ")}`;
  const user = spec.cwd ? `cd ${quote(spec.cwd)} && { ${start}; }` : start;
  return [
    ...PROFILE_STEPS,
    `__pc_d=${d}`,
    `mkdir -p "$__pc_d" && mkfifo "$__pc_d/o" "$__pc_d/e"${spec.stdinStream ? ` "$__pc_d/i"` : ""} || exit 125`,
    ENCODER,
    `__pc_enc <"$__pc_d/o" & __pc_eo=$!`,
    `__pc_enc <"$__pc_d/e" >&2 & __pc_ee=$!`,
    ...(spec.stdinStream ? [FEEDER, `__pc_feed >"$__pc_d/i" 2>/dev/null </dev/null & __pc_fp=$!`] : []),
    `( ${user} ) 3>&1 <${spec.stdinStream ? `"$__pc_d/i"` : "/dev/null"} >"$__pc_d/o" 2>"$__pc_d/e"`,
    `__pc_rc=$?`,
    ...(spec.stdinStream ? [`kill "$__pc_fp" 2>/dev/null`] : []),
    // Output may drain a moment longer; an encoder held open by a background child is then ended.
    `( sleep ${DRAIN_SECONDS}; kill "$__pc_eo" "$__pc_ee" 2>/dev/null ) </dev/null >/dev/null 2>&1 & __pc_w=$!`,
    `wait "$__pc_eo" "$__pc_ee"`,
    `kill "$__pc_w" 2>/dev/null`,
    `rm -rf -- "$__pc_d"`,
    // On a line of its own even after a frame cut short by the drain limit.
    `printf '\\n:exit %s\\n' "$__pc_rc"`,
    `exit "$__pc_rc"`,
  ].join("\n");
}

/** `sh -c '<script>'` (no login shell: its profile output would reach the frames). */
export const plainShell = (script: string): string => `sh -c ${quote(script)}`;

export const PROCESS_SIGNALS = ["TERM", "KILL", "INT", "HUP", "QUIT"] as const;
export type ProcessSignal = (typeof PROCESS_SIGNALS)[number];

/**
 * Signals a streamed process's whole group. The `.killed` mark first: a process that has not yet
 * recorded its group sees it and exits; one that has is found by its record.
 */
export function signalProcessScript(dir: string, signal: ProcessSignal): string {
  const group = quote(`${dir}/group`);
  return `[ -d ${quote(dir)} ] || exit 0; : > ${quote(`${dir}/group.killed`)}; pg=$(cat ${group} 2>/dev/null); if [ -n "$pg" ]; then kill -${signal} "-$pg" 2>/dev/null || kill -${signal} "$pg" 2>/dev/null; fi; true`;
}
