/** What the file ops report about an entry, with owner and group names from the jail's own files. */
import type { Stats } from "node:fs";
import { readFileSync } from "node:fs";

export interface FileInfo {
  name: string;
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  /** Permission bits (e.g. 0o644), without the file type. */
  mode: number;
  uid: number;
  gid: number;
  owner: string;
  group: string;
  mtimeMs: number;
  symlinkTarget?: string;
}

function namesFrom(file: string): Map<number, string> {
  const names = new Map<number, string>();
  try {
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const [name, , id] = line.split(":");
      if (name && id !== undefined && /^\d+$/.test(id)) names.set(Number(id), name);
    }
  } catch {
    // No such file in a custom rootfs: numbers only.
  }
  return names;
}

let users: Map<number, string> | undefined;
let groups: Map<number, string> | undefined;

export function fileInfo(name: string, shownPath: string, stat: Stats, symlinkTarget?: string): FileInfo {
  users ??= namesFrom("/etc/passwd");
  groups ??= namesFrom("/etc/group");
  const type = stat.isFile() ? "file" : stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "other";
  return {
    name,
    path: shownPath,
    type,
    size: stat.size,
    mode: stat.mode & 0o7777,
    uid: stat.uid,
    gid: stat.gid,
    owner: users.get(stat.uid) ?? String(stat.uid),
    group: groups.get(stat.gid) ?? String(stat.gid),
    mtimeMs: Math.round(stat.mtimeMs),
    ...(symlinkTarget === undefined ? {} : { symlinkTarget }),
  };
}
