import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, readlink } from "node:fs/promises";
import path from "node:path";

type EntryKind = "file" | "dir" | "symlink";

export interface TreeEntry {
  kind: EntryKind;
  /** Permission bits (mode & 0o7777). */
  mode: number;
  size: number;
  /** sha256 of a file's bytes. */
  hash?: string;
  /** A symlink's target. */
  target?: string;
}

/** Relative POSIX path → entry, for every file, directory and symlink under a root (not following links). */
export type TreeSnapshot = Map<string, TreeEntry>;

export type PathFilter = (relativePath: string) => boolean;

async function hashFile(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Describes one path, or undefined when it does not exist or is not a file, directory or symlink. */
export async function describePath(absolute: string): Promise<TreeEntry | undefined> {
  let stats;
  try {
    stats = await lstat(absolute);
  } catch {
    return undefined;
  }
  const mode = stats.mode & 0o7777;
  if (stats.isSymbolicLink()) return { kind: "symlink", mode, size: 0, target: await readlink(absolute) };
  if (stats.isDirectory()) return { kind: "dir", mode, size: 0 };
  if (stats.isFile()) return { kind: "file", mode, size: stats.size, hash: await hashFile(absolute) };
  return undefined;
}

/** Walks `root` (without following symlinks), skipping paths `excluded` says to skip. */
export async function snapshotTree(root: string, excluded: PathFilter = () => false): Promise<TreeSnapshot> {
  const out: TreeSnapshot = new Map();
  const walk = async (relativeDir: string): Promise<void> => {
    const entries = await readdir(path.join(root, relativeDir), { withFileTypes: true });
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      const relative = relativeDir ? `${relativeDir}/${entry.name}` : entry.name;
      if (excluded(relative)) continue;
      const described = await describePath(path.join(root, relative));
      if (!described) continue;
      out.set(relative, described);
      if (described.kind === "dir") await walk(relative);
    }
  };
  await walk("");
  return out;
}

export function totalBytes(snapshot: TreeSnapshot): number {
  let total = 0;
  for (const entry of snapshot.values()) total += entry.size;
  return total;
}

/** Same content as far as a workspace sync cares: kind, bytes or link target, and the executable bits of files. */
export function sameEntry(a: TreeEntry | undefined, b: TreeEntry | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.kind !== b.kind) return false;
  if (a.kind === "file") return a.hash === b.hash && (a.mode & 0o111) === (b.mode & 0o111);
  if (a.kind === "symlink") return a.target === b.target;
  return true;
}
