/**
 * Lease directories: the only state of this provider. A lease is adoptable by any later worker from
 * its directory alone (lease.json + the supervisor socket), which is how a lease survives a worker
 * restart and how the CLI's leak clean-up finds leases whose owner is gone.
 *
 * <stateDir>/leases/<leaseId>/
 *   lease.json      LeaseRecord (written atomically)
 *   sup.sock        supervisor control socket (held open by the supervisor inside the jail)
 *   jail.log        bwrap + supervisor stderr
 *   workspace/ home/ cache/ tmp/   the sandbox's writable directories
 *   etc/            generated passwd, group, hosts (bound read-only)
 *   egress/         egress proxy socket directory (bound read-only; only with a grant)
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { readProcStat } from "@paperclip-sandbox/kit";

export const LEASE_ID_PREFIX = "bwrap-";
const LEASE_ID_PATTERN = /^bwrap-[a-z0-9]{16}$/;
/** sockaddr_un.sun_path is 108 bytes including the NUL. */
const MAX_SOCKET_PATH = 107;

export interface EgressGrantRecord {
  allowFqdns: string[];
  allowCidrs: string[];
}

export interface JailRecord {
  /** Host pid of the jail's host-side parent (`timeout`, which runs bwrap). */
  outerPid: number;
  /** Host pid of the pid namespace's init: killing it ends every process in the jail. */
  initPid: number;
  /** /proc/<initPid>/stat start time, to never signal a recycled pid. */
  initStartTime: string;
  /** Pid namespace inode, to confirm no process of the jail is left. */
  pidNamespace: number;
  startedAt: string;
}

export interface LeaseRecord {
  version: 1;
  leaseId: string;
  state: "running" | "stopped";
  createdAt: string;
  /** ISO time at which the supervisor ends the jail. */
  expiresAt: string;
  /** The acquire's requestedExpiresAt: a resume never extends the lease past it. */
  requestedExpiresAt: string | null;
  reuse: boolean;
  /** Kit leaseFingerprint of the acquire (identity + sandbox shape); also in the reuse sentinel. */
  fingerprint: string | null;
  /** Fingerprint of company, environment and sandbox shape only: recomputable from resume params. */
  shapeFingerprint: string;
  grant: EgressGrantRecord;
  /** The worker that last adopted the lease. */
  owner: { pid: number; startTime: string | null; uid: number };
  jail: JailRecord | null;
  /** cgroup directories created for this lease (removed on release). */
  cgroups: string[];
  /** Identity of the acquire, for labels and leak clean-up reports. */
  labels: Record<string, string>;
}

export interface LeasePaths {
  dir: string;
  record: string;
  socket: string;
  log: string;
  workspace: string;
  home: string;
  cache: string;
  tmp: string;
  etc: string;
  egress: string;
  egressSocket: string;
}

/**
 * Default state directory: $XDG_STATE_HOME/paperclip-bubblewrap when set, else a per-uid directory
 * under /var/tmp (persistent across reboots of tmpfs /tmp, and writable by root and non-root users).
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, "paperclip-bubblewrap");
  return path.join("/var/tmp", `paperclip-bubblewrap-${os.userInfo().uid}`);
}

/**
 * Creates (or checks) the state directory: 0700 and owned by us, because it may sit in a shared
 * sticky directory where another user could have planted it or a symlink in its place.
 */
export async function ensureStateDir(stateDir: string): Promise<void> {
  await fsp.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const stat = await fsp.lstat(stateDir);
  const uid = process.getuid?.() ?? 0;
  if (!stat.isDirectory()) throw new Error(`state directory ${stateDir} is not a directory`);
  if (stat.uid !== uid) throw new Error(`state directory ${stateDir} is owned by uid ${stat.uid}, not by this worker (uid ${uid})`);
  if ((stat.mode & 0o077) !== 0) await fsp.chmod(stateDir, 0o700);
  await fsp.mkdir(path.join(stateDir, "leases"), { recursive: true, mode: 0o700 });
}

export function newLeaseId(): string {
  // 16 chars of base36 from 80 random bits: unique, short (socket path limit), filename-safe.
  const bytes = randomBytes(10);
  let value = BigInt(`0x${bytes.toString("hex")}`);
  let id = "";
  for (let i = 0; i < 16; i += 1) {
    id += "0123456789abcdefghijklmnopqrstuvwxyz"[Number(value % 36n)];
    value /= 36n;
  }
  return `${LEASE_ID_PREFIX}${id}`;
}

export function isLeaseId(value: unknown): value is string {
  return typeof value === "string" && LEASE_ID_PATTERN.test(value);
}

export function leasePaths(stateDir: string, leaseId: string): LeasePaths {
  if (!isLeaseId(leaseId)) throw new Error("invalid bubblewrap lease id");
  const dir = path.join(stateDir, "leases", leaseId);
  return {
    dir,
    record: path.join(dir, "lease.json"),
    socket: path.join(dir, "sup.sock"),
    log: path.join(dir, "jail.log"),
    workspace: path.join(dir, "workspace"),
    home: path.join(dir, "home"),
    cache: path.join(dir, "cache"),
    tmp: path.join(dir, "tmp"),
    etc: path.join(dir, "etc"),
    egress: path.join(dir, "egress"),
    egressSocket: path.join(dir, "egress", "proxy.sock"),
  };
}

/** The longest socket path this state dir produces must fit in sockaddr_un. */
export function checkSocketPathLength(stateDir: string): string | null {
  const sample = leasePaths(stateDir, `${LEASE_ID_PREFIX}${"x".repeat(16)}`);
  const longest = Math.max(Buffer.byteLength(sample.socket), Buffer.byteLength(sample.egressSocket));
  return longest > MAX_SOCKET_PATH
    ? `stateDir is too long: lease sockets would be ${longest} bytes, over the ${MAX_SOCKET_PATH}-byte Unix socket limit`
    : null;
}

export async function createLeaseDirs(paths: LeasePaths, etcFiles: Record<string, string>): Promise<void> {
  await fsp.mkdir(paths.dir, { mode: 0o700 });
  await Promise.all(
    [paths.workspace, paths.home, paths.cache, paths.tmp, paths.etc, paths.egress].map((dir) => fsp.mkdir(dir, { mode: 0o700 })),
  );
  // The sandbox's /tmp is shared by every process of the lease, as on a normal host.
  await fsp.chmod(paths.tmp, 0o1777);
  await Promise.all(Object.entries(etcFiles).map(([name, text]) => fsp.writeFile(path.join(paths.etc, name), text, { mode: 0o644 })));
}

export async function writeLeaseRecord(paths: LeasePaths, record: LeaseRecord): Promise<void> {
  const temp = `${paths.record}.${process.pid}.tmp`;
  await fsp.writeFile(temp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  await fsp.rename(temp, paths.record);
}

export async function readLeaseRecord(paths: LeasePaths): Promise<LeaseRecord | null> {
  try {
    const record = JSON.parse(await fsp.readFile(paths.record, "utf8")) as LeaseRecord;
    return record.version === 1 && record.leaseId === path.basename(paths.dir) ? record : null;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

/** /proc/<pid>/stat field 22 (start time in clock ticks since boot); null when the pid is gone. */
export function processStartTime(pid: number): string | null {
  return readProcStat(pid)?.startTicks || null;
}

export function processAlive(pid: number, startTime: string | null): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const current = processStartTime(pid);
  if (current === null) return false;
  return startTime === null || current === startTime;
}

/**
 * Removes a lease tree even when the sandbox left unreadable or unwritable directories in it (the
 * sandbox user is this worker's uid, so it can always restore the permission bits first).
 */
export async function removeTree(dir: string): Promise<void> {
  try {
    await fsp.rm(dir, { recursive: true, force: true, maxRetries: 2 });
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "EACCES" && code !== "EPERM" && code !== "ENOTEMPTY") throw error;
  }
  await restoreOwnerPermissions(dir);
  await fsp.rm(dir, { recursive: true, force: true, maxRetries: 2 });
}

async function restoreOwnerPermissions(dir: string): Promise<void> {
  try {
    await fsp.chmod(dir, 0o700);
  } catch {
    return;
  }
  let entries: fs.Dirent[];
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    if (entry.isDirectory()) await restoreOwnerPermissions(path.join(dir, entry.name));
  }
}

export interface LeaseSummary {
  leaseId: string;
  dir: string;
  record: LeaseRecord | null;
  /** The worker that last adopted the lease is still running. */
  ownerAlive: boolean;
  /** The jail's namespace init is still running. */
  jailAlive: boolean;
  expired: boolean;
}

/** Every lease directory in a state dir, with liveness; used by adoption and the CLI's `leases ls`. */
export async function listLeases(stateDir: string = defaultStateDir(), now = Date.now()): Promise<LeaseSummary[]> {
  let names: string[];
  try {
    names = await fsp.readdir(path.join(stateDir, "leases"));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  const summaries: LeaseSummary[] = [];
  for (const name of names.filter(isLeaseId).sort()) {
    const paths = leasePaths(stateDir, name);
    const record = await readLeaseRecord(paths).catch(() => null);
    summaries.push({
      leaseId: name,
      dir: paths.dir,
      record,
      ownerAlive: record ? processAlive(record.owner.pid, record.owner.startTime) : false,
      jailAlive: record?.jail ? processAlive(record.jail.initPid, record.jail.initStartTime) : false,
      // A directory without a record is an acquire that died half-way (or one in its first
      // milliseconds): count it as expired only once it is clearly old.
      expired: record ? Date.parse(record.expiresAt) <= now : await olderThan(paths.dir, 60_000, now),
    });
  }
  return summaries;
}

async function olderThan(dir: string, ageMs: number, now: number): Promise<boolean> {
  const stat = await fsp.stat(dir).catch(() => null);
  return stat ? now - stat.mtimeMs > ageMs : true;
}

/**
 * Leases the CLI's leak clean-up should reap: the owner worker is gone and the lease is expired (or
 * its record is unreadable, i.e. an acquire died half-way).
 */
export async function findOrphans(stateDir: string = defaultStateDir(), now = Date.now()): Promise<LeaseSummary[]> {
  return (await listLeases(stateDir, now)).filter((lease) => !lease.ownerAlive && lease.expired);
}
