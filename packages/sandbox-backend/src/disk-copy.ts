import { cp, lchown, lstat, mkdir, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Sandbox, SandboxPaths } from "./types.js";

/** A sandbox's writable directories: its "disk" (the image tree is the host's, read-only). */
export const DISK_DIRECTORIES: ReadonlyArray<keyof Pick<SandboxPaths, "workspace" | "home" | "cache" | "tmp">> = ["workspace", "home", "cache", "tmp"];

/** Only regular files, directories and links are kept (sockets, fifos and devices are not). */
async function keep(source: string): Promise<boolean> {
  const info = await lstat(source);
  return info.isFile() || info.isDirectory() || info.isSymbolicLink();
}

const COPY = { recursive: true, force: true, verbatimSymlinks: true, preserveTimestamps: true, filter: keep } as const;

/**
 * Copies a sandbox's disk (its writable directories) into `target` on the host, for emulators whose
 * vendor snapshots a machine's disk. The sandbox is frozen while it is copied (thawed after, unless it
 * was frozen already), so the copy is one moment's state and sandboxed code cannot swap a directory
 * for a link under it; links are copied as links, never followed. Returns the bytes copied.
 */
export async function captureDisk(sandbox: Sandbox, target: string): Promise<number> {
  await mkdir(target, { recursive: true, mode: 0o700 });
  const state = (): Sandbox["state"] => sandbox.state;
  const wasFrozen = state() === "frozen";
  if (!wasFrozen && state() === "running") await sandbox.freeze();
  try {
    for (const name of DISK_DIRECTORIES) await cp(sandbox.paths[name], join(target, name), COPY);
  } catch (error) {
    await rm(target, { recursive: true, force: true });
    throw error;
  } finally {
    if (!wasFrozen && state() === "frozen") await sandbox.thaw();
  }
  return treeBytes(target);
}

/**
 * Fills a fresh sandbox's disk from a copy made by `captureDisk`, before anything runs in it. The
 * copied files get the owner of the directory the backend made (a root backend's jails run as
 * another host uid, which must own what it restored).
 */
export async function restoreDisk(source: string, sandbox: Sandbox): Promise<void> {
  for (const name of DISK_DIRECTORIES) {
    const dir = sandbox.paths[name];
    await copyOver(join(source, name), dir);
    const owner = await stat(dir);
    await chownTree(dir, owner.uid, owner.gid);
  }
}

/**
 * `cp` onto a starting jail's directories: bwrap makes its mount points (home/.cache) while the copy
 * runs, so a directory can appear between cp's check and its mkdir (EEXIST). The copy overwrites,
 * so it is simply made again.
 */
async function copyOver(from: string, to: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await cp(from, to, COPY);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt >= 5) throw error;
    }
  }
}

/** lchown of everything below `dir` (links themselves, never followed). */
async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const at = join(dir, entry.name);
    await lchown(at, uid, gid);
    if (entry.isDirectory()) await chownTree(at, uid, gid);
  }
}

async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const at = join(dir, entry.name);
    if (entry.isDirectory()) total += await treeBytes(at);
    else if (entry.isFile()) total += (await lstat(at)).size;
  }
  return total;
}
