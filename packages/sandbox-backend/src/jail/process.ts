/**
 * Starting and ending a lease's jail process.
 *
 * Start: the worker creates the supervisor's listening socket itself and hands it to the jail as
 * fd 3, so (a) the socket never has to be visible inside the jail, and (b) the first command can be
 * sent at once: the connection waits in the kernel's backlog until the supervisor accepts it, with no
 * polling or sleeping on the cold path. bwrap runs detached (own session, output to the lease's log
 * file) so the jail outlives a worker restart. Its parent is `timeout --signal=KILL <ttl>` and bwrap
 * runs with --die-with-parent: at the lease's expiry the jail ends even if no worker is left and even
 * if sandboxed code has stopped the supervisor (which ends the jail at expiry itself, too). Nothing
 * inside the jail can see or signal that host-side parent.
 *
 * End: SIGKILL to the pid namespace's init ends every process of the jail (setsid/nohup children
 * included, they cannot leave the namespace); the receipt is only given after /proc shows no process
 * left in that namespace and the lease's cgroups are empty.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import net from "node:net";
import { spawn, type ChildProcess } from "node:child_process";
import type { JailRecord } from "../store/lease-store.js";
import { processAlive, processStartTime } from "../store/lease-store.js";
import { cgroupMembers } from "./cgroups.js";
import { isZombieOrGone } from "@paperclip-sandbox/kit";

const INFO_FD = 4;
const LISTEN_FD = 3;
const TIMEOUT_PATH = "timeout"; // coreutils, found on JAIL_ENV_PATH
const JAIL_ENV_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export interface LaunchOptions {
  bwrapPath: string;
  /** bwrap arguments built with `buildJailArgv(..., infoFd = JAIL_INFO_FD)`. */
  bwrapArgs: string[];
  socketPath: string;
  logPath: string;
  /** cgroup.procs files the jail joins before bwrap starts (so every jail process is inside). */
  cgroupProcs: string[];
  /** Epoch ms at which the jail is killed from outside. */
  expiresAt: number;
}

export const JAIL_INFO_FD = INFO_FD;

export interface LaunchedJail {
  /** `record.outerPid` is the host-side `timeout` process, parent of bwrap. */
  record: JailRecord;
  /** Present while this worker is the jail's parent. */
  child: ChildProcess;
  /** Resolves when the outer bwrap exits. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export class JailStartError extends Error {
  override name = "JailStartError";
}

/** Creates a listening Unix socket at `socketPath` and returns its server (still open). */
async function listenAt(socketPath: string): Promise<net.Server> {
  // Bind at a temporary name and rename into place: closing our copy later makes libuv unlink the
  // name it bound, which must not be the final path the supervisor keeps serving.
  const temp = `${socketPath}.${process.pid}.tmp`;
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
  const server = await listenAt(options.socketPath);
  const logFd = fs.openSync(options.logPath, "a", 0o600);
  let child: ChildProcess;
  try {
    const listenFd = serverFd(server);
    const ttlSeconds = Math.max(0.001, (options.expiresAt - Date.now()) / 1000).toFixed(3);
    const jailArgv = ["--signal=KILL", `${ttlSeconds}s`, options.bwrapPath, ...options.bwrapArgs];
    const [command, args] =
      options.cgroupProcs.length === 0
        ? [TIMEOUT_PATH, jailArgv]
        : [
            "/bin/sh",
            [
              "-c",
              // Join every cgroup first, then become bwrap: nothing of the jail runs outside them.
              'while [ "$1" != -- ]; do echo $$ > "$1" || exit 121; shift; done; shift; exec "$@"',
              "sh",
              ...options.cgroupProcs,
              "--",
              TIMEOUT_PATH,
              ...jailArgv,
            ],
          ];
    child = spawn(command, args, {
      detached: true,
      stdio: ["ignore", logFd, logFd, listenFd, "pipe"],
      // Never the worker's environment: it can hold the host's API keys.
      env: { PATH: JAIL_ENV_PATH, LANG: "C.UTF-8" },
    });
  } finally {
    fs.closeSync(logFd);
    // The jail holds its own copy of the listening socket now.
    server.close();
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    child.once("error", () => resolve({ code: null, signal: null }));
  });
  child.unref();

  const info = await readInfo(child, exited);
  if (!info) {
    const result = await exited;
    const tail = await fsp.readFile(options.logPath, "utf8").catch(() => "");
    throw new JailStartError(
      `bubblewrap failed to start the jail (exit ${result.code ?? result.signal}): ${tail.trim().split("\n").slice(-5).join(" | ")}`,
    );
  }
  const initStartTime = processStartTime(info.childPid);
  if (initStartTime === null) throw new JailStartError("the jail ended during start-up");
  return {
    child,
    exited,
    record: {
      outerPid: child.pid!,
      initPid: info.childPid,
      initStartTime,
      pidNamespace: info.pidNamespace,
      startedAt: new Date().toISOString(),
    },
  };
}

/** bwrap writes {"child-pid", "pid-namespace", ...} to the info fd once the namespaces exist. */
async function readInfo(
  child: ChildProcess,
  exited: Promise<unknown>,
): Promise<{ childPid: number; pidNamespace: number } | null> {
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

/** Host pids whose pid namespace is the jail's (readable only for our own uid's processes). */
export async function namespaceMembers(pidNamespace: number): Promise<number[]> {
  const wanted = `pid:[${pidNamespace}]`;
  const members: number[] = [];
  const names = await fsp.readdir("/proc");
  for (const name of names) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    try {
      if ((await fsp.readlink(`/proc/${name}/ns/pid`)) === wanted) members.push(Number(name));
    } catch {
      // Gone, or another user's process (never part of our jail).
    }
  }
  return members;
}

export function jailAlive(record: JailRecord): boolean {
  return processAlive(record.initPid, record.initStartTime);
}

/**
 * Ends every process of the jail and resolves once none is left (namespace scan + cgroups).
 * Throws if processes are still there after `timeoutMs` (then no receipt may be given).
 */
export async function stopJail(
  record: JailRecord,
  cgroupDirs: string[],
  options: { exited?: Promise<unknown>; timeoutMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  if (jailAlive(record)) {
    try {
      process.kill(record.initPid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  // Our own child: its exit is the quickest signal that the init (and so the namespace) has ended.
  if (options.exited) await Promise.race([options.exited, new Promise((resolve) => setTimeout(resolve, 2_000))]);
  for (;;) {
    const initLeft = jailAlive(record) && !isZombieOrGone(record.initPid);
    const members = await namespaceMembers(record.pidNamespace);
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
  // The outer bwrap and its `timeout` parent exit by themselves once the init is gone; end them too
  // if they linger.
  if (processAlive(record.outerPid, null) && !isZombieOrGone(record.outerPid) && isJailParent(record.outerPid)) {
    try {
      process.kill(record.outerPid, "SIGKILL");
    } catch {
      // Exited meanwhile.
    }
  }
}

function isJailParent(pid: number): boolean {
  try {
    return ["timeout", "bwrap"].includes(fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim());
  } catch {
    return false;
  }
}
