import { cp, lchown, lstat, mkdir, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Sandbox, SandboxPaths } from "@paperclip-sandbox/sandbox-backend";

/** A sandbox's writable directories: what a filesystem snapshot keeps (the image tree is read-only). */
const WRITABLE: ReadonlyArray<keyof Pick<SandboxPaths, "workspace" | "home" | "cache" | "tmp">> = ["workspace", "home", "cache", "tmp"];

/** Only regular files, directories and links are kept (sockets, fifos and devices are not). */
async function keep(source: string): Promise<boolean> {
  const info = await lstat(source);
  return info.isFile() || info.isDirectory() || info.isSymbolicLink();
}

const COPY = { recursive: true, force: true, verbatimSymlinks: true, preserveTimestamps: true, filter: keep } as const;

/**
 * Filesystem snapshots as directories: an image is a copy of a sandbox's writable directories, and
 * a sandbox created from it starts with them restored. The sandbox is frozen while it is copied, so
 * the copy is one moment's state and sandboxed code cannot swap a directory for a link under it
 * (links are copied as links, never followed).
 */
export function createSnapshotStore(root: string) {
  const dirOf = (imageId: string) => join(root, imageId);
  return {
    async capture(imageId: string, sandbox: Sandbox): Promise<void> {
      const target = dirOf(imageId);
      await mkdir(target, { recursive: true, mode: 0o700 });
      await sandbox.freeze();
      try {
        for (const name of WRITABLE) await cp(sandbox.paths[name], join(target, name), COPY);
      } catch (error) {
        await rm(target, { recursive: true, force: true });
        throw error;
      } finally {
        await sandbox.thaw();
      }
    },
    /** Before anything runs in a fresh sandbox: its directories get the image's contents. */
    async restore(imageId: string, sandbox: Sandbox): Promise<void> {
      for (const name of WRITABLE) {
        const dir = sandbox.paths[name];
        await cp(join(dirOf(imageId), name), dir, COPY);
        // Copied by this process: owned like the directory the backend made (a root backend's jails
        // run as another host uid, which must own what it restored).
        const owner = await stat(dir);
        await chownTree(dir, owner.uid, owner.gid);
      }
    },
    remove(imageId: string): Promise<void> {
      return rm(dirOf(imageId), { recursive: true, force: true });
    },
  };
}

export type SnapshotStore = ReturnType<typeof createSnapshotStore>;

/** lchown of everything below `dir` (links themselves, never followed). */
async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const at = join(dir, entry.name);
    await lchown(at, uid, gid);
    if (entry.isDirectory()) await chownTree(at, uid, gid);
  }
}
