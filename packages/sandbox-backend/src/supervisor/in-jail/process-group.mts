/**
 * Ending a command and every process it started, whatever session or group they moved to. Each
 * command starts through the command reaper (jail/reaper.ts on the host), which makes the command's
 * own process the subreaper of everything below it: a process that leaves the command's group
 * (`setsid`) and loses its parent is re-parented to the command, not to the jail's init. So while
 * the command's process lives, the process tree below it is everything it started.
 */
import { accessSync, closeSync, constants, openSync, readdirSync, readFileSync, readSync, statSync } from "node:fs";
import path from "node:path";

export interface GroupTarget {
  pgid: number;
  /** Set by the first killGroup call; later calls wait for the same kill. */
  killing: Promise<void> | null;
  /** The signal to report for the command's process when killGroup ended it (see killGroup). */
  exitSignal?: NodeJS.Signals;
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A background child holding a command's pipes open does not hold up its exit beyond this. */
export const OUTPUT_GRACE_MS = 100;

/**
 * After a command exits: the grace, then one I/O poll. After a stall (a busy machine) libuv runs
 * expired timers before it polls, so without the poll the command's last output, already waiting in
 * the pipe, would be cut off.
 */
export const outputGrace = () => sleep(OUTPUT_GRACE_MS).then(() => new Promise<void>((resolve) => setImmediate(resolve)));

function signalPid(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false; // ESRCH: already gone
  }
}

interface ProcEntry {
  pid: number;
  ppid: number;
  pgid: number;
}

/** The jail's live processes (zombies run nothing and are left out), from /proc/<pid>/stat. */
function liveProcesses(): ProcEntry[] {
  const entries: ProcEntry[] = [];
  for (const name of readdirSync("/proc")) {
    const code = name.charCodeAt(0);
    if (code < 48 || code > 57) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "latin1");
    } catch {
      continue; // exited meanwhile
    }
    // After the command name (which may hold spaces and parentheses): state ppid pgrp ...
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z" || fields[0] === "X") continue;
    entries.push({ pid: Number(name), ppid: Number(fields[1]), pgid: Number(fields[2]) });
  }
  return entries;
}

/** What is left of a command: its live descendants, and the live members of its group other than itself. */
function leftOf(root: number, processes: ProcEntry[] = liveProcesses()): number[] {
  const children = new Map<number, number[]>();
  for (const entry of processes) children.set(entry.ppid, [...(children.get(entry.ppid) ?? []), entry.pid]);
  const left = new Set<number>();
  const pending = [...(children.get(root) ?? [])];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    if (left.has(pid)) continue;
    left.add(pid);
    pending.push(...(children.get(pid) ?? []));
  }
  for (const entry of processes) if (entry.pgid === root && entry.pid !== root) left.add(entry.pid);
  return [...left];
}

/**
 * Ends a command and everything it started: the command's own process is held stopped (so it
 * cannot exit, and everything it started stays below it); every other process of its group and below
 * it gets SIGTERM (newcomers too, once each) and the grace; what is left gets SIGKILL until nothing
 * is; the command's process last, by SIGKILL (it never runs again, so it starts nothing more),
 * reporting the SIGTERM it would have died of where SIGTERM's default action would have ended it
 * (`exitSignal`). Resolves once none of them is left.
 */
export function killGroup(target: GroupTarget, graceMs: number): Promise<void> {
  if (target.killing) return target.killing;
  target.killing = (async () => {
    const root = target.pgid;
    if (!signalPid(root, "SIGSTOP")) {
      // Already gone: what it left in its group is all that can still be named.
      await endGroup(root, graceMs);
      return;
    }
    const termed = new Set<number>();
    const terminate = () => {
      for (const pid of leftOf(root)) if (!termed.has(pid) && signalPid(pid, "SIGTERM")) termed.add(pid);
    };
    // Not the held process itself yet: it must outlive everything it started.
    terminate();
    const termDeadline = Date.now() + Math.max(0, graceMs);
    while (leftOf(root).length > 0 && Date.now() < termDeadline) {
      await sleep(10);
      terminate();
    }
    const killDeadline = Date.now() + 5_000;
    for (let left = leftOf(root); left.length > 0 && Date.now() < killDeadline; left = leftOf(root)) {
      for (const pid of left) signalPid(pid, "SIGKILL");
      await sleep(5);
    }
    // Never run again (it could start more): SIGKILL. It reports the SIGTERM it would have died of,
    // unless it catches or ignores SIGTERM (then a SIGKILL would have ended it after the grace anyway).
    if (diesOfTerm(root)) target.exitSignal = "SIGTERM";
    signalPid(root, "SIGKILL");
    for (const until = Date.now() + 1_000; running(root) && Date.now() < until; ) await sleep(5);
    await endGroup(root, 0);
  })();
  return target.killing;
}

const SIGTERM_BIT = 1n << 14n;

/** SIGTERM's default action ends `pid`: SIGTERM neither caught nor ignored (a blocked one ends it once unblocked). */
function diesOfTerm(pid: number): boolean {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, "latin1");
  } catch {
    return false;
  }
  const mask = (name: string) => BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, "m").exec(status)?.[1] ?? "ffffffffffffffff"}`);
  return ((mask("SigIgn") | mask("SigCgt")) & SIGTERM_BIT) === 0n;
}

/** Still running: neither gone nor a zombie. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const state = stat.charAt(stat.lastIndexOf(")") + 2);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** The signal a command's process reports: what killGroup says ended it, else its own. */
export function reportedSignal(target: GroupTarget, signal: NodeJS.Signals | null): NodeJS.Signals | null {
  return signal === "SIGKILL" && target.exitSignal ? target.exitSignal : signal;
}

/** SIGTERM a group, SIGKILL after the grace; resolves once no member is left. */
async function endGroup(pgid: number, graceMs: number): Promise<void> {
  signalGroup(pgid, "SIGTERM");
  const termDeadline = Date.now() + Math.max(0, graceMs);
  while (groupAlive(pgid) && Date.now() < termDeadline) await sleep(10);
  const killDeadline = Date.now() + 5_000;
  while (groupAlive(pgid) && Date.now() < killDeadline) {
    signalGroup(pgid, "SIGKILL");
    await sleep(10);
  }
}

/**
 * How to start `invocation` through the command reaper (jail/reaper.ts): `reaper PATH ARGV0 ARGS...`,
 * PATH found as execvp would (the reaper execs it directly). Unchanged without a reaper, when the
 * command is not found (spawning it directly then fails with the usual error), or when it is neither
 * an ELF binary nor a #! script (execvp runs those with /bin/sh; the reaper's execve would not).
 */
export function throughReaper(
  reaper: string | null | undefined,
  invocation: { file: string; args: string[]; env: Record<string, string> },
  cwd: string,
): { file: string; args: string[]; env: Record<string, string> } {
  if (!reaper) return invocation;
  const found = findExecutable(invocation.file, invocation.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", cwd);
  return found && execsDirectly(found) ? { file: reaper, args: [found, invocation.file, ...invocation.args], env: invocation.env } : invocation;
}

/** An ELF binary or a #! script: what execve runs by itself. */
function execsDirectly(file: string): boolean {
  if (file === "/bin/sh") return true;
  const head = Buffer.alloc(4);
  let fd = -1;
  try {
    fd = openSync(file, "r");
    readSync(fd, head, 0, 4, 0);
  } catch {
    return false; // execute-only: spawn it directly, as before
  } finally {
    if (fd >= 0) closeSync(fd);
  }
  return head.toString("latin1") === "\x7fELF" || head.toString("latin1", 0, 2) === "#!";
}

function findExecutable(file: string, searchPath: string, cwd: string): string | null {
  const candidates = file.includes("/") ? [file] : searchPath.split(":").map((dir) => path.join(dir || ".", file));
  for (const candidate of candidates) {
    const absolute = path.resolve(cwd, candidate);
    try {
      accessSync(absolute, constants.X_OK);
      if (statSync(absolute).isFile()) return absolute;
    } catch {
      // not here
    }
  }
  return null;
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
const SCRIPT_VARIABLE = "PAPERCLIP_SCRIPT";

/** How to run `script` with `/bin/sh` without putting it in argv. */
export function shellCommand(script: string, env: Record<string, string>): { file: string; args: string[]; env: Record<string, string> } {
  return { file: "/bin/sh", args: ["-c", `eval "$${SCRIPT_VARIABLE}"`], env: { ...env, [SCRIPT_VARIABLE]: `unset ${SCRIPT_VARIABLE};${script}` } };
}
