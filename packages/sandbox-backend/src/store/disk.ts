/**
 * A sandbox's own filesystem of `diskMb`: the only way this backend can bound what a sandbox
 * writes. The sandbox's writable directories (workspace, home, cache, tmp) live in
 * `<sandbox>/disk/`; with a disk limit that directory is the mount point of an ext4 image of that
 * size (`<sandbox>/disk.img`, sparse: it takes only what is written), loop-mounted nosuid,nodev.
 * Needs root (mount) and e2fsprogs; elsewhere the limit is reported as not enforced.
 * A mounted disk also keeps the host path of the sandbox directory out of the jail's mountinfo.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import type { HostUser } from "../jail/host-user.js";

const SEARCH = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

function findTool(name: string): string | null {
  for (const dir of SEARCH) {
    try {
      fs.accessSync(`${dir}/${name}`, fs.constants.X_OK);
      return `${dir}/${name}`;
    } catch {
      // keep looking
    }
  }
  return null;
}

function run(file: string, args: string[], timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: timeoutMs, env: { PATH: SEARCH.join(":"), LANG: "C" } }, (error, _stdout, stderr) => {
      if (error) reject(new Error(`${file.split("/").pop()} failed: ${String(stderr).trim().split("\n").slice(-2).join(" | ") || error.message}`));
      else resolve();
    });
  });
}

/** Null when this worker can give sandboxes a disk of their own; otherwise why not. */
export function diskLimitProblem(uid = process.getuid?.() ?? 0): string | null {
  if (uid !== 0) return `a per-sandbox filesystem needs a root worker (this one is uid ${uid}); the sandbox's directories have no quota`;
  const missing = ["mkfs.ext4", "mount", "umount"].filter((tool) => !findTool(tool));
  if (missing.length > 0) return `a per-sandbox filesystem needs ${missing.join(", ")} (e2fsprogs, util-linux)`;
  if (!fs.existsSync("/dev/loop-control")) return "a per-sandbox filesystem needs loop devices (/dev/loop-control is missing)";
  return null;
}

/** True when `dir` is a mount point (its device differs from its parent's). */
export function isMountPoint(dir: string): boolean {
  try {
    return fs.statSync(dir).dev !== fs.statSync(`${dir}/..`).dev;
  } catch {
    return false;
  }
}

export interface DiskPaths {
  /** The mount point, holding the sandbox's writable directories. */
  disk: string;
  image: string;
}

/** Creates the image (sparse), its ext4 filesystem owned by `owner`, and mounts it at `paths.disk`. */
export async function createDisk(paths: DiskPaths, megabytes: number, owner: HostUser | null): Promise<void> {
  const handle = await fsp.open(paths.image, "wx", 0o600);
  try {
    await handle.truncate(megabytes * 1024 * 1024);
  } finally {
    await handle.close();
  }
  const rootOwner = owner ? `root_owner=${owner.uid}:${owner.gid},` : "";
  // No reserved blocks (the sandbox gets all of it), no journal (a scratch disk), nothing written up front.
  await run(findTool("mkfs.ext4")!, ["-q", "-F", "-m", "0", "-O", "^has_journal", "-E", `${rootOwner}nodiscard,lazy_itable_init=1`, paths.image]);
  await mountDisk(paths);
  // mkfs leaves lost+found at the root: not for the sandbox.
  await fsp.rm(`${paths.disk}/lost+found`, { recursive: true, force: true });
}

/** Mounts an existing image (after a host restart the mount is gone, the image is not). */
export async function mountDisk(paths: DiskPaths): Promise<void> {
  if (isMountPoint(paths.disk)) return;
  await fsp.mkdir(paths.disk, { recursive: true, mode: 0o700 });
  await run(findTool("mount")!, ["-o", "loop,nosuid,nodev,noatime", paths.image, paths.disk]);
}

/** Unmounts (once no process uses it: the jail is gone by then) and removes the image. */
export async function removeDisk(paths: DiskPaths): Promise<void> {
  if (isMountPoint(paths.disk)) {
    const umount = findTool("umount");
    if (!umount) throw new Error(`cannot unmount ${paths.disk}: umount is missing`);
    let lastError: unknown = null;
    for (let attempt = 0; attempt < 20 && isMountPoint(paths.disk); attempt += 1) {
      try {
        await run(umount, [paths.disk]);
      } catch (error) {
        lastError = error;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    if (isMountPoint(paths.disk)) throw new Error(`the disk of ${paths.disk} stays mounted: ${(lastError as Error | null)?.message ?? "busy"}`);
  }
  await fsp.rm(paths.image, { force: true });
}
