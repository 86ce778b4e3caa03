/**
 * What the supervisor does before it serves anything, so commands can neither reach it nor inherit
 * what they should not (the rest is the jail's seccomp filter and the execute-only loader the
 * supervisor was started through, see jail/seccomp.ts and jail/loader.ts on the host):
 * - closes every descriptor it inherited except stdio and the control socket (fd 3): whatever the
 *   worker inherited without close-on-exec would otherwise reach every command;
 * - uses up the pids up to the guarded bound, so every command gets a larger one: the seccomp filter
 *   refuses signals (and the other same-uid controls) aimed at pids up to that bound, which are the
 *   jail's init, this process and its threads. Node creates all its threads at start-up (V8's
 *   platform workers, libuv's pool: ten here), and pids are handed out in order in a fresh pid
 *   namespace; after a wrap the kernel resumes at 300, above the bound;
 * - ignores SIGUSR1, which would otherwise open Node's inspector on the jail's loopback.
 */
import { spawn } from "node:child_process";
import { closeSync, readdirSync, readFileSync } from "node:fs";

const O_CLOEXEC = 0o2000000;

/** Closes the inherited descriptors (those without close-on-exec: Node opens all of its own with it), except `keep`. */
export function closeInheritedDescriptors(keep: ReadonlySet<number>): number[] {
  const closed: number[] = [];
  let names: string[];
  try {
    names = readdirSync("/proc/self/fdinfo");
  } catch {
    return closed;
  }
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || keep.has(fd)) continue;
    let flags: number;
    try {
      const match = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"));
      if (!match) continue;
      flags = parseInt(match[1]!, 8);
    } catch {
      continue; // the directory's own descriptor, closed meanwhile
    }
    if ((flags & O_CLOEXEC) !== 0) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // already closed
    }
  }
  return closed;
}

export interface PidGuard {
  /** Signals and controls aimed at pids 1..guardedUpTo are refused by the jail's seccomp filter. */
  guardedUpTo: number;
  /** This process's thread ids. */
  threads: number[];
  /** Every thread is guarded and every pid up to the bound is used: no command can get one. */
  complete: boolean;
}

const lastPid = (): number => Number(readFileSync("/proc/sys/kernel/ns_last_pid", "utf8"));

/** Uses pids up to `guardedUpTo` (a shell forking short-lived children) so commands never get one. */
export async function reserveGuardedPids(guardedUpTo: number): Promise<PidGuard> {
  for (let attempt = 0; attempt < 4; attempt += 1) {
    const last = lastPid();
    if (last >= guardedUpTo) break;
    // The shell takes one pid, each `:&` one more.
    const forks = guardedUpTo - last - 1;
    await new Promise<void>((resolve) => {
      const child = spawn("/bin/sh", ["-c", forks > 0 ? `${":&".repeat(forks)}wait` : ":"], { stdio: "ignore" });
      child.once("exit", () => resolve());
      child.once("error", () => resolve());
    });
  }
  const threads = readdirSync("/proc/self/task")
    .map(Number)
    .sort((a, b) => a - b);
  const complete = lastPid() >= guardedUpTo && threads.every((tid) => tid >= 1 && tid <= guardedUpTo);
  return { guardedUpTo, threads, complete };
}

/** Keeps SIGUSR1 (Node's inspector) from doing anything in the supervisor. */
export function ignoreInspectorSignal(): void {
  process.on("SIGUSR1", () => undefined);
}
