import { createHash } from "node:crypto";
import { lstat, mkdir, readdir, rm, stat } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createOpenSshSession,
  isSshTransportError,
  knownHostsLinesFor,
  pollUntil,
  readKnownHosts,
  seedKnownHost,
  writePrivateFile,
  type OpenSshSession,
  type SshDestination,
} from "@paperclip-sandbox/kit";
import type { PollClock, VmRecord } from "./api.js";
import type { ExeDevConfig, SshIdentity } from "./config.js";

/**
 * Where this worker keeps SSH state: `<tmp>/paperclip-exe-dev-<uid>/` (0700, this user's, never a
 * link), holding one private directory per connection (key file and control socket, removed with
 * the lease) and one directory per environment for host keys.
 */
export async function runtimeBase(parent = tmpdir()): Promise<string> {
  const uid = process.getuid?.() ?? 0;
  const base = join(parent, `paperclip-exe-dev-${uid}`);
  await mkdir(base, { recursive: true, mode: 0o700 });
  const info = await lstat(base);
  if (!info.isDirectory() || info.uid !== uid || (info.mode & 0o077) !== 0) {
    throw new Error(`${base} is not a private directory of this user (a link, someone else's, or open to others): refusing to keep SSH keys there`);
  }
  return base;
}

/** The environment's host-key directory (host keys learned in one environment are never trusted in another). */
export async function environmentDir(base: string, companyId: string, environmentId: string): Promise<string> {
  const dir = join(base, `env-${createHash("sha256").update(`${companyId}\0${environmentId}`).digest("hex").slice(0, 16)}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** Where ssh dials a VM and as whom: the config's user, else the user in exe.dev's destination, else exe.dev's `ssh_user`. */
export function destinationOf(vm: Pick<VmRecord, "sshDest" | "sshHost" | "sshUser" | "sshPort" | "name">, config: ExeDevConfig, knownPort?: number): SshDestination {
  const at = vm.sshDest.lastIndexOf("@");
  const destUser = at > 0 ? vm.sshDest.slice(0, at) : undefined;
  const host = at > 0 ? vm.sshDest.slice(at + 1) : vm.sshDest;
  return { host, port: vm.sshPort ?? knownPort ?? config.sshPort, user: config.sshUser ?? destUser ?? vm.sshUser };
}

export interface VmSshOptions {
  vmName: string;
  destination: SshDestination;
  identity: SshIdentity;
  config: ExeDevConfig;
  base: string;
  envDir: string;
  /** A VM just made: any key recorded for its name before belongs to an earlier machine and is forgotten. */
  fresh: boolean;
  /** Host-key lines recorded at acquire (lease metadata), restored in a fresh worker. */
  seed?: readonly string[];
}

/** The session for one VM and the known_hosts file that pins its key. */
export async function openVmSession(opts: VmSshOptions): Promise<{ session: OpenSshSession; knownHostsFile: string }> {
  let knownHostsFile: string;
  let mode: "accept-new" | "pinned";
  if (opts.config.sshKnownHosts !== undefined) {
    mode = "pinned";
    knownHostsFile = join(opts.envDir, `pinned-${createHash("sha256").update(opts.config.sshKnownHosts).digest("hex").slice(0, 16)}`);
    await writePrivateFile(knownHostsFile, `${opts.config.sshKnownHosts.trim()}\n`);
  } else {
    mode = "accept-new";
    knownHostsFile = join(opts.envDir, `${opts.vmName}.known_hosts`);
    if (opts.fresh) await rm(knownHostsFile, { force: true });
    else if (opts.seed?.length) await seedKnownHost(knownHostsFile, opts.destination.host, opts.destination.port, opts.seed);
  }
  const identity = "file" in opts.identity ? { file: opts.identity.file } : { privateKey: opts.identity.privateKey };
  const session = await createOpenSshSession({
    name: `exe.dev VM ${opts.vmName}`,
    destination: opts.destination,
    identity,
    hostKeys: { mode, knownHostsFile },
    runtimeDir: opts.base,
  });
  return { session, knownHostsFile };
}

/** The host-key lines recorded for a destination (kept in the lease metadata). */
export async function recordedHostKeys(knownHostsFile: string, destination: SshDestination): Promise<string[]> {
  return knownHostsLinesFor(await readKnownHosts(knownHostsFile), destination.host, destination.port);
}

/**
 * Connects, waiting while a new VM's sshd comes up (refused or reset connections); a host-key or
 * authentication failure is final at once.
 */
export async function connectWhenUp(session: Pick<OpenSshSession, "connect">, signal: AbortSignal, clock: PollClock & { pauseMs?: number } = {}): Promise<void> {
  const pauseMs = clock.pauseMs ?? 250;
  const failure = await pollUntil(
    () =>
      session.connect().then(
        () => undefined,
        (error: unknown) => ({ error }),
      ),
    (outcome) => outcome === undefined || signal.aborted || !booting(outcome.error),
    { what: "the VM's sshd to accept connections", intervalMs: pauseMs, maxIntervalMs: pauseMs, signal, now: clock.now, sleep: clock.sleep },
  );
  if (failure) throw failure.error;
}

/** A refused or reset connection: the VM's sshd is not up yet. */
const booting = (error: unknown) => isSshTransportError(error) && (error.code === "connect_failed" || error.code === "connection_lost");

/**
 * Removes connection directories a crashed worker left (a private key inside): older than
 * `olderThanMs` and with no live master on their control socket.
 */
export async function sweepStaleSessions(base: string, olderThanMs = 10 * 60_000): Promise<number> {
  let swept = 0;
  for (const name of await readdir(base).catch(() => [] as string[])) {
    if (!name.startsWith("pcssh-")) continue;
    const dir = join(base, name);
    const info = await stat(dir).catch(() => undefined);
    if (!info || Date.now() - info.mtimeMs < olderThanMs) continue;
    if (await socketAnswers(join(dir, "c"))) continue;
    await rm(dir, { recursive: true, force: true });
    swept += 1;
  }
  return swept;
}

function socketAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
