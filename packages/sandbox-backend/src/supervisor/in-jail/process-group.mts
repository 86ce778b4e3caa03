/** Ending a command's whole process group (the command and every child it started). */

export interface GroupTarget {
  pgid: number;
  /** Set by the first killGroup call; later calls wait for the same kill. */
  killing: Promise<void> | null;
}

export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** SIGTERM the whole group, SIGKILL after the grace, and resolve once no member is left. */
export function killGroup(target: GroupTarget, graceMs: number): Promise<void> {
  if (target.killing) return target.killing;
  target.killing = (async () => {
    signalGroup(target.pgid, "SIGTERM");
    const termDeadline = Date.now() + Math.max(0, graceMs);
    while (groupAlive(target.pgid) && Date.now() < termDeadline) await sleep(10);
    // Members that ignored SIGTERM (or were stopped) are ended for good.
    const killDeadline = Date.now() + 5_000;
    while (groupAlive(target.pgid) && Date.now() < killDeadline) {
      signalGroup(target.pgid, "SIGKILL");
      await sleep(10);
    }
  })();
  return target.killing;
}

/** Under a memory limit the OOM killer should pick a command, never the supervisor (whose exit ends the jail). */
export function preferForOom(pid: number, writeFile: (path: string, text: string) => void): void {
  try {
    writeFile(`/proc/${pid}/oom_score_adj`, "500");
  } catch {
    // The command may already have exited.
  }
}

/** A grace in ms from a control message field: a finite number in [0, 60 s], else the default. */
export function graceFrom(value: unknown, fallback = 250): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? Math.min(value, 60_000) : fallback;
}

/**
 * The variable that carries a shell script to `sh`: never its argv, which any user of the host can
 * read in /proc/<pid>/cmdline (scripts carry per-command secrets as `export KEY='value'`), while
 * /proc/<pid>/environ is readable only by the sandbox user. The script unsets it first, so nothing it
 * starts inherits it.
 */
export const SCRIPT_VARIABLE = "PAPERCLIP_SCRIPT";

/** How to run `script` with `/bin/sh` without putting it in argv. */
export function shellCommand(script: string, env: Record<string, string>): { file: string; args: string[]; env: Record<string, string> } {
  return { file: "/bin/sh", args: ["-c", `eval "$${SCRIPT_VARIABLE}"`], env: { ...env, [SCRIPT_VARIABLE]: `unset ${SCRIPT_VARIABLE};${script}` } };
}
