/**
 * The host user a sandbox runs as. The sandbox user (uid 1000 inside) is whatever host uid bwrap
 * runs as: for a root worker that would be host root, which can read every root-only file of the
 * bound host trees and leave root-owned setuid files on the host disk. So a root worker runs its
 * jails as a dedicated unprivileged host uid instead (DEFAULT_JAIL_HOST_UID unless configured): the
 * keeper stays root (it joins the cgroups and thaws them at the deadline) and the jail prelude
 * (prelude.ts) takes that uid and gid, with no supplementary groups, right before bwrap (setpriv on
 * an arch without a prelude). The sandbox's writable
 * directories belong to that uid; the state directory becomes traversable (0711) so it can reach
 * them, while the records, logs and deadlines in it stay 0600 root.
 * An unprivileged worker's jails run as the worker's own uid (it could not switch anyway).
 */
import fs from "node:fs";
import { SandboxInputError } from "../errors.js";

export interface HostUser {
  uid: number;
  gid: number;
}

/** A uid outside the usual system, user, container (subuid) and systemd ranges. */
export const DEFAULT_JAIL_HOST_UID = 2_000_000_000;

const SETPRIV_CANDIDATES = ["/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv", "/sbin/setpriv"];

const validId = (value: unknown): value is number => typeof value === "number" && Number.isInteger(value) && value >= 1 && value < 2 ** 32 - 1 && value !== 65535;

/**
 * The host user this worker's jails run as, or null when it is the worker's own (unprivileged) uid.
 * `configured` is BackendOptions.hostUser.
 */
export function resolveJailHostUser(configured: HostUser | undefined, workerUid = process.getuid?.() ?? 0, workerGid = process.getgid?.() ?? 0): HostUser | null {
  if (configured !== undefined) {
    if (typeof configured !== "object" || configured === null || !validId(configured.uid) || !validId(configured.gid)) {
      throw new SandboxInputError("hostUser must be {uid, gid}, each an integer in [1, 4294967294] other than 65535 (0 would make the sandbox user host root)");
    }
  }
  if (workerUid !== 0) {
    if (configured && (configured.uid !== workerUid || configured.gid !== workerGid)) {
      throw new SandboxInputError(`hostUser ${configured.uid}:${configured.gid} needs a root worker (this one is uid ${workerUid}, which its jails run as)`);
    }
    return null;
  }
  return configured ?? { uid: DEFAULT_JAIL_HOST_UID, gid: DEFAULT_JAIL_HOST_UID };
}

/** The setpriv prefix that starts bwrap as `user` (an arch without a prelude, the probe); throws when setpriv is missing. */
export function dropPrivilegesCommand(user: HostUser): string[] {
  const setpriv = SETPRIV_CANDIDATES.find((candidate) => {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (!setpriv) throw new Error(`running jails as host uid ${user.uid} (not root) needs setpriv (util-linux), not found in ${SETPRIV_CANDIDATES.join(", ")}`);
  return [setpriv, `--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--"];
}

/**
 * Null when `user` may reach `target` (pass every directory on the way, and read and execute it when
 * it is a file); otherwise the path that stops it, with its mode. bwrap resolves every bind source
 * by path as the jail's host user, descriptors included (it reads their /proc/self/fd link).
 */
export function unreachableBy(target: string, user: HostUser): string | null {
  const parts = target.split("/").filter(Boolean);
  for (let i = 0; i <= parts.length; i += 1) {
    const at = `/${parts.slice(0, i).join("/")}`;
    let stat: fs.Stats;
    try {
      stat = fs.statSync(at);
    } catch {
      return at;
    }
    const shift = stat.uid === user.uid ? 6 : stat.gid === user.gid ? 3 : 0;
    const need = stat.isDirectory() ? 0o1 : 0o5;
    if (((stat.mode >> shift) & need) !== need) return `${at} (mode ${(stat.mode & 0o777).toString(8).padStart(4, "0")})`;
  }
  return null;
}
