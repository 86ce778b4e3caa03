import { STREAM_TRANSPORT, type ScriptRunner } from "../../transport.js";
import { runSpawnedScript } from "../../transports/spawn-process.js";

export interface LocalScriptRunnerOptions {
  cwd: string;
  /** The complete environment of `sh` (nothing is inherited from the worker). */
  env: Record<string, string>;
  shell?: string;
  /** Called with the process group id of every script started (e.g. to end stragglers at release). */
  onSpawn?: (pgid: number) => void;
}

/**
 * Runs scripts on this machine, each in its own session/process group (`detached: true`).
 *
 * Only an abort ends the group. When the script exits normally, background processes it started
 * keep running on purpose: the host starts long-lived helpers (e.g. its callback bridge) with one
 * execute and talks to them in later ones. Whoever owns the lifetime (lease release) ends them.
 */
export function createLocalScriptRunner(opts: LocalScriptRunnerOptions): ScriptRunner {
  const shell = opts.shell ?? "/bin/sh";
  return {
    capabilities: STREAM_TRANSPORT,
    run: (script, io) => runSpawnedScript({ file: shell, args: ["-c", script], cwd: opts.cwd, env: opts.env, onSpawn: opts.onSpawn }, io),
  };
}
