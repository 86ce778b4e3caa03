/**
 * Starting and ending a sandbox's jail process.
 *
 * Start: the worker creates the supervisor's listening socket itself and hands it to the jail as
 * fd 3, so (a) the socket never has to be visible inside the jail, and (b) the first command can be
 * sent at once: the connection waits in the kernel's backlog until the supervisor accepts it, with no
 * polling or sleeping on the cold path. Nothing of the jail's configuration is in a world-readable
 * argv: the supervisor's config goes over a pipe (fd 5), bwrap's options over another (`--args 6`),
 * the seccomp filter over a third (fd 7). fd 8 is node's ELF loader (bwrap copies it into the jail
 * execute-only); fd 9 is the command reaper on a pipe (bwrap copies it in too), or /dev/null. Every one of fds 3-9 is
 * set (to /dev/null when unused), so no descriptor the worker inherited can ride along in that range,
 * and the jail prelude (prelude.ts) closes every one above it before bwrap runs; the supervisor
 * closes whatever it inherited and does not need before it serves anything.
 * bwrap's stdout is /dev/null; its stderr (and the supervisor's) is the sandbox's log, which the
 * jail's init does not keep.
 * The jail's parent is its keeper (keeper.ts), spawned detached (own session, output to the
 * sandbox's log file) so the jail outlives a worker restart but never its deadline. A root worker's
 * keeper stays root (it joins the cgroups and thaws them at the deadline); the jail prelude drops to
 * the jail's unprivileged host uid right before bwrap.
 *
 * End: SIGKILL to the pid namespace's init ends every process of the jail (setsid/nohup children
 * included, they cannot leave the namespace); the receipt is only given after /proc shows no process
 * left in that namespace and the sandbox's cgroups are empty, and the keeper has gone too.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import type { Writable } from "node:stream";
import { isZombieOrGone, readProcStat } from "@paperclip-sandbox/kit";
import { processAlive, processStartTime } from "../store/proc.js";
import { cgroupMembers } from "./cgroups.js";
import { KEEPER_NAME, KEEPER_SCRIPT, writeDeadline } from "./keeper.js";

// fd 3 is the supervisor's listening socket (the stdio slot after stderr).
const INFO_FD = 4;
const CONFIG_FD = 5;
const ARGS_FD = 6;
const SECCOMP_FD = 7;
const LOADER_FD = 8;
const REAPER_FD = 9;
const JAIL_ENV_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export const JAIL_FDS = { infoFd: INFO_FD, configFd: CONFIG_FD, argsFd: ARGS_FD, seccompFd: SECCOMP_FD, loaderFd: LOADER_FD, reaperFd: REAPER_FD } as const;

export interface JailRecord {
  /** Host pid of the jail's keeper (bwrap's parent). */
  keeperPid: number;
  keeperStartTime: string | null;
  /** Host pid of the pid namespace's init: killing it ends every process in the jail. */
  initPid: number;
  /** /proc/<initPid>/stat start time, to never signal a recycled pid. */
  initStartTime: string;
  /** Pid namespace inode, to confirm no process of the jail is left. */
  pidNamespace: number;
  startedAt: string;
}

export interface LaunchOptions {
  bwrapPath: string;
  /** bwrap's options, built with `buildJailArgv(layout, JAIL_FDS)`: they go on the args pipe. */
  bwrapOptions: string[];
  /** What bwrap runs (the supervisor command). */
  bwrapCommand: string[];
  /**
   * What bwrap is started through: the jail prelude (prelude.ts: the drop to the jail's host user,
   * a fresh session keyring, fds from 10 closed), or setpriv on an arch without one, or nothing.
   */
  startPrefix: string[];
  /** The compiled seccomp filter (its options name SECCOMP_FD), or null. */
  seccompProgram: Buffer | null;
  /** Host file copied into the jail as the execute-only loader (options name LOADER_FD), or null. */
  loaderFile: string | null;
  /** The command reaper, written to its pipe (options name REAPER_FD), or null. */
  reaperProgram?: Buffer | null;
  socketPath: string;
  logPath: string;
  /** cgroup.procs files the jail joins before bwrap starts (so every jail process is inside). */
  cgroupProcs: string[];
  /** The keeper's deadline file (outside every directory bound into the jail). */
  deadlineFile: string;
  /** Epoch ms at which the keeper ends the jail. */
  expiresAt: number;
  /** What the keeper writes where at the deadline, so a frozen jail can die (cgroup freezer). */
  thaw?: { file: string; value: string };
  /** Where the keeper records the jail's exit status when it ends on its own (removed first). */
  exitFile?: string;
  /** The supervisor's JSON config, written to its config pipe. */
  supervisorConfig: string;
}

export interface LaunchedJail {
  record: JailRecord;
  /** Present while this worker is the keeper's parent. */
  child: ChildProcess;
  /** Resolves when the keeper exits (it exits right after the jail). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

class JailStartError extends Error {
  override name = "JailStartError";
}

/** Creates a listening Unix socket at `socketPath` and returns its server (still open). */
async function listenAt(socketPath: string): Promise<net.Server> {
  // Bind at a temporary name and rename into place: closing our copy later makes libuv unlink the
  // name it bound, which must not be the final path the supervisor keeps serving. (Short, like the
  // final name: both must fit in sockaddr_un.)
  const temp = path.join(path.dirname(socketPath), `.l${process.pid}`);
  await fsp.rm(temp, { force: true });
  await fsp.rm(socketPath, { force: true });
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ path: temp, backlog: 64 }, () => resolve());
  });
  await fsp.rename(temp, socketPath);
  return server;
}

function serverFd(server: net.Server): number {
  // Node has no public accessor for a listening socket's fd; the handle's fd is stable on Unix.
  const fd = (server as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) throw new JailStartError("cannot pass the supervisor socket to the jail (no fd)");
  return fd;
}

export async function launchJail(options: LaunchOptions): Promise<LaunchedJail> {
  await writeDeadline(options.deadlineFile, options.expiresAt);
  if (options.exitFile) await fsp.rm(options.exitFile, { force: true });
  const server = await listenAt(options.socketPath);
  const opened: number[] = [];
  const open = (file: string, flags: string | number) => {
    const fd = fs.openSync(file, flags, 0o600);
    opened.push(fd);
    return fd;
  };
  let child: ChildProcess;
  try {
    const logFd = open(options.logPath, "a");
    const devNull = open("/dev/null", "r");
    const loaderFd = options.loaderFile ? open(options.loaderFile, "r") : devNull;
    const listenFd = serverFd(server);
    const firstNapMs = Math.max(0, Math.ceil(options.expiresAt - Date.now()));
    child = spawn(
      "/bin/sh",
      [
        "-c",
        KEEPER_SCRIPT,
        KEEPER_NAME,
        options.deadlineFile,
        String(firstNapMs),
        options.thaw?.file ?? "",
        options.thaw?.value ?? "",
        options.exitFile ?? "",
        ...options.cgroupProcs,
        "--",
        ...options.startPrefix,
        options.bwrapPath,
        "--args",
        String(ARGS_FD),
        ...options.bwrapCommand,
      ],
      {
        detached: true,
        stdio: ["ignore", devNull, logFd, listenFd, "pipe", "pipe", "pipe", options.seccompProgram ? "pipe" : devNull, loaderFd, options.reaperProgram ? "pipe" : devNull],
        // Never the worker's environment: it can hold the host's API keys.
        env: { PATH: JAIL_ENV_PATH, LANG: "C.UTF-8" },
      },
    );
  } finally {
    for (const fd of opened) fs.closeSync(fd);
    // The jail holds its own copy of the listening socket now.
    server.close();
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    child.once("error", () => resolve({ code: null, signal: null }));
  });
  child.unref();
  const pipes = child.stdio as unknown as Array<Writable | null | undefined>;
  const feed = (fd: number, data: string | Buffer) => {
    const pipe = pipes[fd];
    if (!pipe) return;
    // EPIPE when bwrap failed before reading: its exit and log say why.
    pipe.on("error", () => undefined);
    pipe.end(data, () => pipe.destroy());
  };
  feed(ARGS_FD, Buffer.from(`${options.bwrapOptions.join("\0")}\0`));
  if (options.seccompProgram) feed(SECCOMP_FD, options.seccompProgram);
  if (options.reaperProgram) feed(REAPER_FD, options.reaperProgram);
  feed(CONFIG_FD, options.supervisorConfig);

  const info = await readInfo(child, exited);
  if (!info) {
    const result = await exited;
    const tail = await fsp.readFile(options.logPath, "utf8").catch(() => "");
    throw new JailStartError(`bubblewrap failed to start the jail (exit ${result.code ?? result.signal}): ${tail.trim().split("\n").slice(-5).join(" | ")}`);
  }
  const initStartTime = processStartTime(info.childPid);
  if (initStartTime === null) throw new JailStartError("the jail ended during start-up");
  return {
    child,
    exited,
    record: {
      keeperPid: child.pid!,
      keeperStartTime: processStartTime(child.pid!),
      initPid: info.childPid,
      initStartTime,
      pidNamespace: info.pidNamespace,
      startedAt: new Date().toISOString(),
    },
  };
}

/** bwrap writes {"child-pid", "pid-namespace", ...} to the info fd once the namespaces exist. */
async function readInfo(child: ChildProcess, exited: Promise<unknown>): Promise<{ childPid: number; pidNamespace: number } | null> {
  const stream = child.stdio[INFO_FD] as NodeJS.ReadableStream | null | undefined;
  if (!stream) return null;
  let text = "";
  const done = new Promise<void>((resolve) => {
    stream.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      // bwrap keeps the fd open in its monitor process: stop at the first complete JSON object.
      if (text.includes("}")) resolve();
    });
    stream.once("end", () => resolve());
  });
  await Promise.race([done, exited]);
  (stream as unknown as { destroy(): void }).destroy();
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const childPid = Number(parsed["child-pid"]);
    const pidNamespace = Number(parsed["pid-namespace"]);
    if (!Number.isInteger(childPid) || childPid <= 0) return null;
    return { childPid, pidNamespace };
  } catch {
    return null;
  }
}

/** What identifies a jail's processes on the host. */
export type JailIdentity = Pick<JailRecord, "pidNamespace" | "initPid" | "initStartTime">;

/**
 * Host pids of the jail: those whose pid namespace is the jail's and, for processes whose namespace
 * link this worker may not read (the supervisor is not dumpable; an unprivileged worker cannot
 * readlink its /proc entries), those descending from the jail's init (/proc/<pid>/stat is public).
 *
 * Only while the jail's init runs. The kernel hands a freed namespace's inode number to the next
 * namespace made (any jail's, any worker's), so once the init has ended the number may name another
 * jail; and an ended init leaves nothing of its jail behind (the kernel ends every process of the
 * namespace before the init itself is gone). Checked again after the scan, which the init may not outlive.
 */
export async function namespaceMembers(jail: JailIdentity): Promise<number[]> {
  const initRuns = () => processAlive(jail.initPid, jail.initStartTime) && !isZombieOrGone(jail.initPid);
  if (!initRuns()) return [];
  const members = await scanNamespace(jail);
  return initRuns() ? members : [];
}

async function scanNamespace(jail: JailIdentity): Promise<number[]> {
  const wanted = `pid:[${jail.pidNamespace}]`;
  const members: number[] = [];
  const unreadable: number[] = [];
  const names = await fsp.readdir("/proc");
  for (const name of names) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    try {
      if ((await fsp.readlink(`/proc/${name}/ns/pid`)) === wanted) members.push(Number(name));
    } catch (error) {
      // Gone (ENOENT), or not ours to read: another user's process, or a non-dumpable one of the jail.
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EACCES" || code === "EPERM") unreadable.push(Number(name));
    }
  }
  if (unreadable.length > 0) {
    const parents = new Map<number, number>();
    const parentOf = (pid: number): number => {
      let parent = parents.get(pid);
      if (parent === undefined) {
        parent = readProcStat(pid)?.ppid ?? 0;
        parents.set(pid, parent);
      }
      return parent;
    };
    for (const pid of unreadable) {
      for (let at = parentOf(pid), hops = 0; at > 1 && hops < 64; at = parentOf(at), hops += 1) {
        if (at === jail.initPid) {
          members.push(pid);
          break;
        }
      }
    }
  }
  return members;
}

export function jailAlive(record: JailRecord): boolean {
  return processAlive(record.initPid, record.initStartTime);
}

/** The exit status the keeper recorded for a jail that ended on its own; null when none is recorded. */
export function recordedJailExit(exitFile: string): number | null {
  try {
    const text = fs.readFileSync(exitFile, "utf8").trim();
    return /^\d{1,3}$/.test(text) ? Number(text) : null;
  } catch {
    return null;
  }
}

export interface StopOptions {
  /** The keeper's exit, when this worker spawned it: the quickest sign that the jail is gone. */
  exited?: Promise<unknown>;
  timeoutMs?: number;
  /** Lets frozen tasks run into their pending SIGKILL (cgroup freezer); called after the first kill. */
  thaw?: () => Promise<void>;
}

/**
 * Ends every process of the jail and resolves once none is left (namespace scan + cgroups) and its
 * keeper has exited. Throws if processes are still there after `timeoutMs` (then no receipt may be given).
 */
export async function stopJail(record: JailRecord, cgroupDirs: string[], options: StopOptions = {}): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  if (jailAlive(record)) {
    try {
      process.kill(record.initPid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  // Frozen tasks keep a pending SIGKILL until they are thawed; the kill came first, so no sandboxed
  // code runs in between.
  if (options.thaw) await options.thaw().catch(() => undefined);
  // Our own child: its exit is the quickest signal that the init (and so the namespace) has ended.
  if (options.exited) await Promise.race([options.exited, new Promise((resolve) => setTimeout(resolve, 2_000))]);
  for (;;) {
    const initLeft = jailAlive(record) && !isZombieOrGone(record.initPid);
    const members = await namespaceMembers(record);
    const inCgroups = await cgroupMembers(cgroupDirs);
    if (!initLeft && members.length === 0 && inCgroups.length === 0) break;
    if (Date.now() > deadline) {
      throw new Error(`jail processes still running after kill (namespace: ${members.length}, cgroups: ${inCgroups.length})`);
    }
    for (const pid of [...members, ...inCgroups]) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Exited meanwhile.
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await endKeeper(record, deadline);
}

/** The keeper exits by itself once bwrap has; end it if it lingers (only ever our verified keeper). */
async function endKeeper(record: JailRecord, deadline: number): Promise<void> {
  const alive = () => processAlive(record.keeperPid, record.keeperStartTime) && !isZombieOrGone(record.keeperPid);
  const graceEnd = Math.min(deadline, Date.now() + 1_000);
  while (alive() && Date.now() < graceEnd) await new Promise((resolve) => setTimeout(resolve, 5));
  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    if (!alive()) return;
    try {
      process.kill(record.keeperPid, signal);
    } catch {
      return;
    }
    const end = Date.now() + 500;
    while (alive() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
