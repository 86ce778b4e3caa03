/**
 * Path confinement for file ops. They run here, inside the jail, as the sandbox user, so the jail
 * already bounds what they can reach; `roots` narrows that further to chosen directories (e.g.
 * /workspace), against symlinks that sandboxed code planted to redirect a caller's path.
 *
 * How: a directory is opened (the kernel follows every link) and then asked where it really is
 * (/proc/self/fd/N); it is refused unless that lies inside a root. Everything after that goes
 * through /proc/self/fd/N/<name>, which acts like openat(N, name): a component swapped for a link
 * after the check cannot redirect the operation. The final component is never followed by an op
 * that changes it (write, mkdir, remove, move act on the name itself).
 */
import fsp from "node:fs/promises";
import { constants } from "node:fs";
import path from "node:path";
import { OpError } from "./conversation.mjs";

const MAX_PATH = 4096;

/** An absolute, normalized in-jail path; refuses relative paths, NUL bytes and over-long paths. */
export function normalizePath(value: unknown, name = "path"): string {
  if (typeof value !== "string" || value.length === 0) throw new OpError("EINVAL", `${name} must be a non-empty string`);
  if (value.length > MAX_PATH) throw new OpError("ENAMETOOLONG", `${name} is longer than ${MAX_PATH} characters`);
  if (value.includes("\0")) throw new OpError("EINVAL", `${name} contains a NUL byte`);
  if (!value.startsWith("/")) throw new OpError("EINVAL", `${name} must be absolute (got ${value.slice(0, 200)})`);
  const normalized = path.posix.normalize(value);
  return normalized.length > 1 && normalized.endsWith("/") ? normalized.slice(0, -1) : normalized;
}

export class Confinement {
  private constructor(
    /** Real paths of the roots; null means no confinement beyond the jail itself. */
    private readonly roots: string[] | null,
    /** The roots as the caller named them (normalized), so a root itself can be stat-ed and listed. */
    readonly named: string[],
  ) {}

  static async from(value: unknown): Promise<Confinement> {
    if (value === undefined || value === null) return new Confinement(null, []);
    if (!Array.isArray(value) || value.length === 0 || value.length > 64) throw new OpError("EINVAL", "roots must be a list of 1-64 absolute paths");
    const named = value.map((root) => normalizePath(root, "roots[]"));
    const real: string[] = [];
    for (const root of named) {
      // A root that does not exist confines to nothing (it cannot contain anything).
      const resolved = await fsp.realpath(root).catch(() => null);
      if (resolved) real.push(resolved);
    }
    return new Confinement(real, named);
  }

  get confined(): boolean {
    return this.roots !== null;
  }

  contains(realPath: string): boolean {
    if (this.roots === null) return true;
    return this.roots.some((root) => root === "/" || realPath === root || realPath.startsWith(`${root}/`));
  }

  check(realPath: string, shown: string): void {
    if (!this.contains(realPath)) throw new OpError("EOUTSIDE", `${shown} resolves outside the allowed roots`);
  }
}

export const fdPath = (handle: fsp.FileHandle) => `/proc/self/fd/${handle.fd}`;

/** Where an open file really is. */
export async function realPathOf(handle: fsp.FileHandle): Promise<string> {
  return fsp.readlink(fdPath(handle));
}

/** Opens a directory, following links, and refuses it unless it really lies inside the roots. */
export async function openDirectory(dir: string, confinement: Confinement): Promise<fsp.FileHandle> {
  const handle = await fsp.open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    confinement.check(await realPathOf(handle), dir);
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** A verified parent directory and the final component, addressed through the parent's fd. */
export interface ParentRef {
  dir: fsp.FileHandle;
  name: string;
  /** The in-jail path as the caller named it. */
  shown: string;
  /** /proc/self/fd/<parent>/<name>: the final component, relative to the verified parent. */
  at(name?: string): string;
  close(): Promise<void>;
}

export async function openParent(target: string, confinement: Confinement): Promise<ParentRef> {
  if (target === "/") throw new OpError("EINVAL", "the operation needs a path below /");
  const name = path.posix.basename(target);
  const dir = await openDirectory(path.posix.dirname(target), confinement);
  return {
    dir,
    name,
    shown: target,
    at: (other = name) => `${fdPath(dir)}/${other}`,
    close: () => dir.close(),
  };
}

/** Creates `dir` and any missing parents (each new component opened without following links). */
export async function makeDirectories(dir: string, confinement: Confinement, mode: number): Promise<{ created: boolean }> {
  const parts = dir.split("/").filter(Boolean);
  // The deepest ancestor that exists already (links followed, then verified).
  let depth = parts.length;
  let handle: fsp.FileHandle | null = null;
  for (; depth >= 0; depth -= 1) {
    try {
      handle = await openDirectory(`/${parts.slice(0, depth).join("/")}`, confinement);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  if (!handle) throw new OpError("ENOENT", `no ancestor of ${dir} exists`);
  if (depth === parts.length) {
    await handle.close();
    return { created: false };
  }
  try {
    for (const part of parts.slice(depth)) {
      const next = `${fdPath(handle)}/${part}`;
      try {
        await fsp.mkdir(next, { mode });
        await fsp.chmod(next, mode);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      let opened: fsp.FileHandle;
      try {
        opened = await fsp.open(next, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ELOOP" || code === "ENOTDIR") throw new OpError("EEXIST", `${dir}: ${part} exists and is not a directory`);
        throw error;
      }
      await handle.close();
      handle = opened;
    }
    return { created: true };
  } finally {
    await handle.close();
  }
}
