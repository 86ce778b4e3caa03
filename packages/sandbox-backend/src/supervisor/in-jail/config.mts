/**
 * The supervisor's configuration. It arrives on an inherited pipe (fd number in argv[2]), never in
 * argv: argv is readable by every user of the host (/proc/<pid>/cmdline) and the sandbox
 * environment may hold the caller's secrets.
 */
import { closeSync, readFileSync } from "node:fs";

export interface SupervisorConfig {
  /** Environment every command starts from (PATH, HOME, proxy variables, the egress grant, the sandbox env...). */
  baseEnv: Record<string, string>;
  defaultCwd: string;
  /** When set, a TCP listener on 127.0.0.1:port forwards to this Unix socket (the egress proxy). */
  egress?: { port: number; socketPath: string };
  /** Per-stream output buffer of an exec when the request names none, and the most a request may ask for. */
  outputLimitBytes?: number;
  maxOutputLimitBytes?: number;
  /** The jail's seccomp filter guards pids up to this bound (hardening.mts); 0 when it has no filter. */
  guardedPidMax?: number;
  /** The command reaper every command is started through (jail/reaper.ts on the host), or null. */
  reaper?: string | null;
  /** Exit (ending the jail) after this long with nothing to do (idle.mts); 0: never. */
  idleExitMs?: number;
}

const CONFIG_DEFAULTS = {
  outputLimitBytes: 1024 * 1024,
  maxOutputLimitBytes: 16 * 1024 * 1024,
};

/** Reads the JSON config from the fd named in `arg` (and closes it); an inline JSON object is accepted too. */
export function readConfig(arg: string | undefined): SupervisorConfig {
  let text = arg ?? "{}";
  if (/^\d+$/.test(text)) {
    const fd = Number(text);
    text = readFileSync(fd, "utf8");
    closeSync(fd);
  }
  const parsed = JSON.parse(text) as Partial<SupervisorConfig>;
  return {
    baseEnv: parsed.baseEnv ?? {},
    defaultCwd: parsed.defaultCwd ?? "/",
    egress: parsed.egress,
    outputLimitBytes: parsed.outputLimitBytes ?? CONFIG_DEFAULTS.outputLimitBytes,
    maxOutputLimitBytes: parsed.maxOutputLimitBytes ?? CONFIG_DEFAULTS.maxOutputLimitBytes,
    guardedPidMax: typeof parsed.guardedPidMax === "number" ? parsed.guardedPidMax : 0,
    reaper: typeof parsed.reaper === "string" ? parsed.reaper : null,
    idleExitMs: typeof parsed.idleExitMs === "number" && parsed.idleExitMs > 0 ? parsed.idleExitMs : 0,
  };
}
