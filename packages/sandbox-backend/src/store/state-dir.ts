/** The state directory and the per-sandbox directories in it. */
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { SandboxExistsError } from "../errors.js";
import { unreachableBy, type HostUser } from "../jail/host-user.js";
import { createDisk, removeDisk } from "./disk.js";
import { mountDirOf, mountStorageOf, sandboxesDir, socketsDir, type SandboxLayout } from "./layout.js";

/**
 * Creates (or checks) the state directory: owned by us and 0700 (0711 when jails run as another host
 * uid, which must traverse it to reach its own directories; nothing in it can be listed), because it
 * may sit in a shared sticky directory where another user could have planted it or a symlink in its
 * place.
 */
export async function ensureStateDir(stateDir: string, options: { jailUser?: HostUser | null } = {}): Promise<void> {
  const jailUser = options.jailUser ?? null;
  const mode = jailUser ? 0o711 : 0o700;
  await fsp.mkdir(stateDir, { recursive: true, mode });
  const stat = await fsp.lstat(stateDir);
  const uid = process.getuid?.() ?? 0;
  if (!stat.isDirectory()) throw new Error(`state directory ${stateDir} is not a directory`);
  if (stat.uid !== uid) throw new Error(`state directory ${stateDir} is owned by uid ${stat.uid}, not by this worker (uid ${uid})`);
  if ((stat.mode & 0o777) !== mode) await fsp.chmod(stateDir, mode);
  for (const dir of [sandboxesDir(stateDir), socketsDir(stateDir)]) {
    await fsp.mkdir(dir, { recursive: true, mode });
    await fsp.chmod(dir, mode);
  }
  if (jailUser) await checkReachable(stateDir, jailUser);
}

/** Throws, naming the directory, unless `user` may pass every directory on the way to `dir`. */
async function checkReachable(dir: string, user: HostUser): Promise<void> {
  const blocked = unreachableBy(path.resolve(dir), user);
  if (blocked) {
    throw new Error(
      `state directory ${dir} is out of reach of uid ${user.uid}, which jails run as: ${blocked} does not let it pass; choose a state directory under /var/lib or /var/tmp, or make the directories on the way traversable (o+x)`,
    );
  }
}

/**
 * Creates a new sandbox's directories; EEXIST (SandboxExistsError) when the id is taken. With
 * `owner` (jails run as another host uid) what the jail uses belongs to it and the directories on
 * the way are traversable; the record, log and deadline the worker writes there stay 0600.
 */
export async function createSandboxDirs(
  layout: SandboxLayout,
  id: string,
  owner: HostUser | null = null,
  diskMb: number | null = null,
  mountSpecs: ReadonlyArray<{ volume?: string; subPath?: string }> = [],
): Promise<void> {
  const mountCount = mountSpecs.length;
  const passage = owner ? 0o711 : 0o700;
  try {
    await fsp.mkdir(layout.dir, { mode: passage });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") throw new SandboxExistsError(`a sandbox with id ${id} already exists`);
    throw error;
  }
  if (owner) await fsp.chmod(layout.dir, passage);
  await fsp.mkdir(layout.disk, { mode: 0o700 });
  if (diskMb !== null) await createDisk({ disk: layout.disk, image: layout.diskImage }, diskMb, owner);
  // The writable directories' parent: only the jail's host user may pass (its setuid files stay its own).
  await fsp.chmod(layout.disk, 0o700);
  if (owner) await fsp.chown(layout.disk, owner.uid, owner.gid);
  const mounts = [...new Set(mountSpecs.map((mount, index) => mountStorageOf(layout, mount, index)))];
  if (mountCount > 0) await fsp.mkdir(layout.mounts, { mode: 0o700 });
  const owned = [layout.workspace, layout.home, layout.cache, layout.tmp, ...(mountCount > 0 ? [layout.mounts] : []), ...mounts];
  await Promise.all(owned.filter((dir) => dir !== layout.mounts).map((dir) => fsp.mkdir(dir, { mode: 0o700 })));
  // Like a Kubernetes emptyDir: open to every user of the jail (the disk above stays the jail user's only).
  await Promise.all(mounts.map((dir) => fsp.chmod(dir, 0o777)));
  const subDirs = mountSpecs.flatMap((mount, index) => (mount.subPath ? [mountDirOf(layout, mount, index)] : []));
  for (const dir of subDirs) await fsp.mkdir(dir, { recursive: true, mode: 0o777 });
  // The sandbox's /tmp is shared by every process of the sandbox, as on a normal host.
  await fsp.chmod(layout.tmp, 0o1777);
  await fsp.rm(layout.socketDir, { recursive: true, force: true });
  await fsp.mkdir(layout.egress, { recursive: true, mode: 0o700 });
  if (owner) {
    await Promise.all([...owned, layout.egress].map((dir) => fsp.chown(dir, owner.uid, owner.gid)));
    for (const dir of subDirs) {
      // Every directory from the storage down to the subPath, made by this worker, becomes the jail user's.
      const storage = mounts.find((root) => dir.startsWith(`${root}/`))!;
      let at = storage;
      for (const part of path.relative(storage, dir).split(path.sep)) {
        at = path.join(at, part);
        await fsp.chown(at, owner.uid, owner.gid);
      }
    }
    await fsp.chmod(layout.socketDir, passage);
  }
}

/**
 * Removes a sandbox tree even when the sandbox left unreadable or unwritable directories in it (the
 * sandbox user is this worker's uid, so it can always restore the permission bits first).
 */
async function removeTree(dir: string): Promise<void> {
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

/** Removes a sandbox's directories: its disk unmounted first (a mount point cannot be removed). */
export async function removeSandboxTree(layout: SandboxLayout): Promise<void> {
  await removeTree(layout.socketDir);
  await removeDisk({ disk: layout.disk, image: layout.diskImage });
  await removeTree(layout.dir);
}
