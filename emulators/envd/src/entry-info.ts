import type { FileInfo } from "@paperclip-sandbox/sandbox-backend";
import type { Dialect } from "./envd-access.js";

/** `filesystem.EntryInfo` in proto3 JSON. Novita's older schema has no symlink type and no metadata. */
export interface EntryInfo {
  name: string;
  type: "FILE_TYPE_FILE" | "FILE_TYPE_DIRECTORY" | "FILE_TYPE_SYMLINK" | "FILE_TYPE_UNSPECIFIED";
  path: string;
  size: string;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedTime: string;
  symlinkTarget?: string;
}

export function entryInfo(info: FileInfo, dialect: Dialect): EntryInfo {
  const type =
    info.type === "file" ? "FILE_TYPE_FILE" : info.type === "directory" ? "FILE_TYPE_DIRECTORY" : info.type === "symlink" && dialect === "e2b" ? "FILE_TYPE_SYMLINK" : "FILE_TYPE_UNSPECIFIED";
  return {
    name: info.name,
    type,
    path: info.path,
    size: String(info.size),
    mode: info.mode & 0o7777,
    permissions: permissionString(info),
    owner: info.owner,
    group: info.group,
    modifiedTime: new Date(info.mtimeMs).toISOString(),
    ...(info.symlinkTarget !== undefined && dialect === "e2b" ? { symlinkTarget: info.symlinkTarget } : {}),
  };
}

/** `ls -l` style, as Go's FileMode.String() prints it (`-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`). */
function permissionString(info: FileInfo): string {
  const kind = info.type === "directory" ? "d" : info.type === "symlink" ? "L" : "-";
  const bits = "rwxrwxrwx";
  let out = kind;
  for (let i = 0; i < 9; i++) out += info.mode & (1 << (8 - i)) ? bits[i] : "-";
  return out;
}
