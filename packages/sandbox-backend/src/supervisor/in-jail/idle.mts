/**
 * A supervisor with nothing to do exits with IDLE_EXIT_CODE, and its jail ends with it: an idle
 * sandbox then holds no process and no memory at all. The host keeps the sandbox as running
 * ("dormant") and starts a fresh jail on the same disk the next time it is used (sandbox.ts), so
 * nothing a jail restart would lose may exist: idle means no connection, no command running or kept
 * (exec output waiting to be read), no process in the jail but its init and this one (background
 * processes run on), and nothing in /dev/shm (the jail's own tmpfs).
 */
import { readdirSync, readFileSync } from "node:fs";

/** The supervisor's exit status for "idle": the jail's init and bwrap pass it on, the keeper records it. */
const IDLE_EXIT_CODE = 75;

export interface IdleWatch {
  /** A connection opened. */
  enter(): void;
  /** A connection closed (or something that kept the supervisor busy ended). */
  leave(): void;
}

function onlyInitAndSelf(): boolean {
  for (const name of readdirSync("/proc")) {
    const code = name.charCodeAt(0);
    if (code < 48 || code > 57 || name === "1" || name === String(process.pid)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "latin1");
      const state = stat.charAt(stat.lastIndexOf(")") + 2);
      if (state !== "Z" && state !== "X") return false;
    } catch {
      // exited meanwhile
    }
  }
  return true;
}

function shmEmpty(): boolean {
  try {
    return readdirSync("/dev/shm").length === 0;
  } catch {
    return true;
  }
}

/**
 * Exits `idleMs` after the last connection closed, once `busy()` is false and the jail holds nothing
 * else; checks again every `idleMs` while it does. `idleMs` 0: never.
 */
export function watchIdle(idleMs: number, busy: () => boolean, log: (message: string) => void): IdleWatch {
  let open = 0;
  let timer: NodeJS.Timeout | null = null;
  const arm = () => {
    if (idleMs <= 0 || open > 0) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(check, idleMs);
  };
  const check = () => {
    timer = null;
    if (open > 0) return;
    if (busy() || !onlyInitAndSelf() || !shmEmpty()) return arm();
    log(`idle for ${idleMs} ms with nothing running: exiting (the host starts a fresh jail on next use)`);
    process.exit(IDLE_EXIT_CODE);
  };
  arm();
  return {
    enter() {
      open += 1;
      if (timer) clearTimeout(timer);
      timer = null;
    },
    leave() {
      open = Math.max(0, open - 1);
      arm();
    },
  };
}
