/**
 * Where a sandbox lives on the host. The sandbox directory carries the id (readable for operators
 * and the leak clean-up); the sockets live under a short hashed name, so their paths fit in
 * sockaddr_un (107 bytes) whatever the id's length.
 *
 * <stateDir>/leases/<id>/
 *   sandbox.json    SandboxRecord (written atomically)
 *   jail.log        keeper, bwrap and supervisor stderr
 *   deadline        the keeper's deadline (epoch ms; never bound into the jail)
 *   jail.exit       the jail's exit status when it ended on its own (the keeper writes it)
 *   disk/           workspace/ home/ cache/ tmp/: the sandbox's writable directories; with a disk
 *                   limit (root) the mount point of disk.img, a filesystem of that size (disk.ts)
 * <stateDir>/etc/<sha256>/  generated passwd, group, hosts, one per content (per sandbox user; bound read-only)
 * <stateDir>/run/<shortName(id)>/
 *   sup.sock        supervisor control socket (held open by the supervisor inside the jail)
 *   egress/         egress proxy socket directory (bound read-only; only with a grant)
 */
import path from "node:path";
import { shortName } from "../ids.js";

/** sockaddr_un.sun_path is 108 bytes including the NUL. */
export const MAX_SOCKET_PATH = 107;

export interface SandboxLayout {
  dir: string;
  /** Its cgroups' name (`cgroupNameOf`): one per state dir and id. */
  cgroupName: string;
  record: string;
  log: string;
  deadline: string;
  /** The jail's exit status, recorded by the keeper when the jail ends on its own. */
  exitStatus: string;
  /** Holds the writable directories; a mount point when the sandbox has a disk of its own. */
  disk: string;
  diskImage: string;
  workspace: string;
  home: string;
  cache: string;
  tmp: string;
  /** Parent of the further writable directories (`mounts/<index>`). */
  mounts: string;
  socketDir: string;
  socket: string;
  egress: string;
  egressSocket: string;
}

/** Host directory holding a mount's storage: its volume's (shared by every mount naming it) or its own. */
export function mountStorageOf(layout: SandboxLayout, mount: { volume?: string }, index: number): string {
  return path.join(layout.mounts, mount.volume !== undefined ? `v-${mount.volume}` : String(index));
}

/** Host directory bound for a mount: its storage, or the `subPath` inside it. */
export function mountDirOf(layout: SandboxLayout, mount: { volume?: string; subPath?: string }, index: number): string {
  const storage = mountStorageOf(layout, mount, index);
  return mount.subPath ? path.join(storage, mount.subPath) : storage;
}

export function sandboxesDir(stateDir: string): string {
  return path.join(stateDir, "leases");
}

export function socketsDir(stateDir: string): string {
  return path.join(stateDir, "run");
}

/**
 * Paths of sandbox `id` (which must already be validated). `legacy`: a version-2 record's sandbox,
 * whose writable directories sit directly in its directory.
 */
export function sandboxLayout(stateDir: string, id: string, options: { legacy?: boolean } = {}): SandboxLayout {
  const dir = path.join(sandboxesDir(stateDir), id);
  const socketDir = path.join(socketsDir(stateDir), shortName(id));
  const disk = path.join(dir, "disk");
  const data = options.legacy ? dir : disk;
  return {
    dir,
    cgroupName: cgroupNameOf(stateDir, id),
    record: path.join(dir, "sandbox.json"),
    log: path.join(dir, "jail.log"),
    deadline: path.join(dir, "deadline"),
    exitStatus: path.join(dir, "jail.exit"),
    disk,
    diskImage: path.join(dir, "disk.img"),
    workspace: path.join(data, "workspace"),
    home: path.join(data, "home"),
    cache: path.join(data, "cache"),
    tmp: path.join(data, "tmp"),
    mounts: path.join(data, "mounts"),
    socketDir,
    socket: path.join(socketDir, "sup.sock"),
    egress: path.join(socketDir, "egress"),
    egressSocket: path.join(socketDir, "egress", "proxy.sock"),
  };
}

/** Null when every socket path this state dir produces fits in sockaddr_un; else why not. */
export function checkSocketPathLength(stateDir: string): string | null {
  const sample = sandboxLayout(stateDir, "x");
  // The supervisor socket is bound at a temporary name first (process.ts): `.l<pid>`, pid up to 7 digits.
  const longest = Math.max(Buffer.byteLength(sample.socket), Buffer.byteLength(sample.egressSocket), Buffer.byteLength(path.join(sample.socketDir, ".l4194304")));
  return longest > MAX_SOCKET_PATH ? `stateDir is too long: sandbox sockets would be ${longest} bytes, over the ${MAX_SOCKET_PATH}-byte Unix socket limit` : null;
}

/**
 * The cgroup name of sandbox `id` of the backend at `stateDir` (cgroup names are length-limited too).
 * Cgroups are machine-wide: two backends (workers, emulators, a root and an unprivileged run) may hold
 * the same id, and a name from the id alone would hand one the other's cgroup.
 */
export function cgroupNameOf(stateDir: string, id: string): string {
  return `paperclip-sbx-${shortName(`${path.resolve(stateDir)}\0${id}`)}`;
}
