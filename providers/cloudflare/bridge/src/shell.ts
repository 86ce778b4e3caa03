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
