import fs from "node:fs/promises";
import type { Stats } from "node:fs";
import type { PluginSyncFileMapping } from "@paperclipai/plugin-sdk";
import { SyncError } from "./errors.js";
import { hostPath } from "./mapping.js";

/** The host side of a sync-in mapping: its source must exist with the mapping's kind. */
export async function statHostSource(mapping: PluginSyncFileMapping): Promise<{ source: string; stat: Stats }> {
  const source = hostPath(mapping.sourcePath, "sourcePath");
  // stat, not lstat: a file mapping carries bytes, so a symlinked source file is read through.
  const stat = await fs.stat(source).catch(() => undefined);
  const ok = mapping.kind === "file" ? stat?.isFile() : stat?.isDirectory();
  if (stat === undefined || !ok) {
    throw new SyncError("SYNC_SOURCE_INVALID", `host source ${source} is not a ${mapping.kind === "file" ? "regular file" : "directory"}`);
  }
  return { source, stat };
}

/** The mode a file lands with in the sandbox: the mapping's, else the host file's permission bits. */
export function fileModeFor(mapping: PluginSyncFileMapping, stat: Stats): number {
  return mapping.mode ?? stat.mode & 0o777;
}
