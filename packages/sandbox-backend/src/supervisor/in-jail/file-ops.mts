/**
 * The metadata file ops (`fs` with op stat, list, mkdir, remove, move), each one request and one
 * reply. See confinement.mts for how paths are resolved.
 */
import fsp from "node:fs/promises";
import { constants } from "node:fs";
import path from "node:path";
import { OpError } from "./conversation.mjs";
import { Confinement, fdPath, makeDirectories, normalizePath, openDirectory, openParent } from "./confinement.mjs";
import { fileInfo, type FileInfo } from "./file-info.mjs";

const MAX_LIST_ENTRIES = 100_000;
const DEFAULT_LIST_ENTRIES = 10_000;
const MAX_DEPTH = 32;

function modeFrom(value: unknown, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0o7777) throw new OpError("EINVAL", "mode must be an integer in [0, 0o7777]");
  return value;
}

function intOption(value: unknown, name: string, fallback: number, max: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) throw new OpError("EINVAL", `${name} must be an integer in [1, ${max}]`);
  return value;
}

async function symlinkTarget(linkPath: string): Promise<string | undefined> {
  return fsp.readlink(linkPath).catch(() => undefined);
}

async function stat(message: Record<string, unknown>, confinement: Confinement): Promise<FileInfo> {
  const target = normalizePath(message.path);
  const name = target === "/" ? "/" : path.posix.basename(target);
  if (message.follow === true || target === "/" || confinement.named.includes(target)) {
    // Following links: where the path really leads must be inside the roots.
    const real = await fsp.realpath(target);
    confinement.check(real, target);
    return fileInfo(name, target, await fsp.stat(real));
  }
  const parent = await openParent(target, confinement);
  try {
    const entry = await fsp.lstat(parent.at());
    return fileInfo(name, target, entry, entry.isSymbolicLink() ? await symlinkTarget(parent.at()) : undefined);
  } finally {
    await parent.close();
  }
}

async function list(message: Record<string, unknown>, confinement: Confinement): Promise<FileInfo[]> {
  const target = normalizePath(message.path);
  const depth = intOption(message.depth, "depth", 1, MAX_DEPTH);
  const maxEntries = intOption(message.maxEntries, "maxEntries", DEFAULT_LIST_ENTRIES, MAX_LIST_ENTRIES);
  const entries: FileInfo[] = [];
  const walk = async (dir: fsp.FileHandle, shown: string, level: number): Promise<void> => {
    const names = (await fsp.readdir(fdPath(dir))).sort();
    for (const name of names) {
      const at = `${fdPath(dir)}/${name}`;
      const entry = await fsp.lstat(at).catch(() => null);
      if (!entry) continue; // removed meanwhile
      const shownPath = shown === "/" ? `/${name}` : `${shown}/${name}`;
      entries.push(fileInfo(name, shownPath, entry, entry.isSymbolicLink() ? await symlinkTarget(at) : undefined));
      if (entries.length > maxEntries) throw new OpError("E2BIG", `${target} has more than ${maxEntries} entries (raise maxEntries, at most ${MAX_LIST_ENTRIES})`);
      if (entry.isDirectory() && level < depth) {
        // Below the listed directory links are never followed: a subdirectory is opened as itself.
        const sub = await fsp.open(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW).catch(() => null);
        if (!sub) continue;
        try {
          await walk(sub, shownPath, level + 1);
        } finally {
          await sub.close();
        }
      }
    }
  };
  const dir = await openDirectory(target, confinement);
  try {
    await walk(dir, target, 1);
  } finally {
    await dir.close();
  }
  return entries;
}

async function mkdir(message: Record<string, unknown>, confinement: Confinement): Promise<{ created: boolean }> {
  const target = normalizePath(message.path);
  const mode = modeFrom(message.mode, 0o755);
  if (message.parents === true) return makeDirectories(target, confinement, mode);
  const parent = await openParent(target, confinement);
  try {
    await fsp.mkdir(parent.at(), { mode });
    await fsp.chmod(parent.at(), mode);
    return { created: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    const existing = await fsp.lstat(parent.at());
    if (existing.isDirectory()) return { created: false };
    throw new OpError("EEXIST", `${target} exists and is not a directory`);
  } finally {
    await parent.close();
  }
}

async function remove(message: Record<string, unknown>, confinement: Confinement): Promise<Record<string, never>> {
  const target = normalizePath(message.path);
  const parent = await openParent(target, confinement);
  try {
    const entry = await fsp.lstat(parent.at());
    if (entry.isDirectory()) {
      if (message.recursive === true) await fsp.rm(parent.at(), { recursive: true, force: false, maxRetries: 2 });
      else await fsp.rmdir(parent.at());
    } else {
      // A link is removed itself, never what it points to.
      await fsp.unlink(parent.at());
    }
    return {};
  } finally {
    await parent.close();
  }
}

async function move(message: Record<string, unknown>, confinement: Confinement): Promise<FileInfo> {
  const from = normalizePath(message.from, "from");
  const to = normalizePath(message.to, "to");
  const source = await openParent(from, confinement);
  try {
    const destination = await openParent(to, confinement);
    try {
      await fsp.lstat(source.at());
      if (message.overwrite !== true) {
        const existing = await fsp.lstat(destination.at()).catch(() => null);
        if (existing) throw new OpError("EEXIST", `${to} already exists`);
      }
      try {
        await fsp.rename(source.at(), destination.at());
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
        // Between two of the jail's mounts (e.g. /workspace and /tmp): copy, then remove the source.
        await fsp.cp(source.at(), destination.at(), { recursive: true, verbatimSymlinks: true, force: true, errorOnExist: false });
        await fsp.rm(source.at(), { recursive: true, force: false });
      }
      const entry = await fsp.lstat(destination.at());
      return fileInfo(destination.name, to, entry, entry.isSymbolicLink() ? await symlinkTarget(destination.at()) : undefined);
    } finally {
      await destination.close();
    }
  } finally {
    await source.close();
  }
}

export const FILE_OPS: Record<string, (message: Record<string, unknown>, confinement: Confinement) => Promise<unknown>> = {
  stat,
  list,
  mkdir,
  remove,
  move,
};
