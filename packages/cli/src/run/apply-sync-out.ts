import { randomBytes } from "node:crypto";
import { constants, createReadStream, createWriteStream } from "node:fs";
import { lstat, mkdir, open, rename, rmdir, symlink, unlink } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { describePath, sameEntry, snapshotTree, type PathFilter, type TreeEntry, type TreeSnapshot } from "./workspace-snapshot.js";

export interface SyncBackResult {
  created: string[];
  updated: string[];
  deleted: string[];
  /** Changed in the sandbox AND locally during the run: the local version was kept. */
  conflicts: string[];
  /** Not applied because a local parent is not a real directory (e.g. a symlink). */
  skipped: string[];
}

/**
 * Applies what changed in the sandbox to the workspace, without clobbering local edits.
 *
 * `before` is the workspace as it was sent in; `stagingDir` holds the sandbox's copy after the
 * command (synced out there, never straight into the workspace). A path is written only when the
 * sandbox changed it (staged differs from `before`) and the local copy still equals `before`.
 * Writes go to a temporary name in the same directory and are renamed over the target; nothing is
 * written through a symlink.
 */
export async function applySyncOut(
  before: TreeSnapshot,
  stagingDir: string,
  workspaceDir: string,
  excluded: PathFilter,
  /** Paths sync out left out on purpose (unsafe symlinks): absent from the staging copy, yet not deleted. */
  notSynced: ReadonlySet<string> = new Set(),
): Promise<SyncBackResult> {
  const after = await snapshotTree(stagingDir, excluded);
  const result: SyncBackResult = { created: [], updated: [], deleted: [], conflicts: [], skipped: [] };

  // Deletions first, deepest paths first, so directories are empty when we reach them.
  const removed = [...before.keys()].filter((p) => !after.has(p) && !notSynced.has(p)).sort((a, b) => b.length - a.length);
  for (const relative of removed) {
    const base = before.get(relative)!;
    const target = path.join(workspaceDir, relative);
    if (!(await parentIsRealDirectory(workspaceDir, relative))) {
      result.skipped.push(relative);
      continue;
    }
    const local = await describePath(target);
    if (!local) continue; // already gone locally
    if (!sameEntry(local, base)) {
      result.conflicts.push(relative);
      continue;
    }
    try {
      if (local.kind === "dir") await rmdir(target);
      else await unlink(target);
      result.deleted.push(relative);
    } catch {
      result.conflicts.push(relative); // e.g. a directory that still holds local-only files
    }
  }

  // Creations and updates, parents before children.
  const staged = [...after.keys()].sort((a, b) => a.split("/").length - b.split("/").length || a.localeCompare(b));
  for (const relative of staged) {
    const next = after.get(relative)!;
    const base = before.get(relative);
    if (sameEntry(next, base)) continue; // the sandbox did not change it
    const target = path.join(workspaceDir, relative);
    if (!(await parentIsRealDirectory(workspaceDir, relative))) {
      result.skipped.push(relative);
      continue;
    }
    const local = await describePath(target);
    if (sameEntry(local, next)) continue; // already identical
    if (!sameEntry(local, base)) {
      result.conflicts.push(relative);
      continue;
    }
    await writeEntry(path.join(stagingDir, relative), target, next, local);
    (base ? result.updated : result.created).push(relative);
  }
  return result;
}

async function parentIsRealDirectory(root: string, relative: string): Promise<boolean> {
  const parts = relative.split("/").slice(0, -1);
  let current = root;
  for (const part of parts) {
    current = path.join(current, part);
    try {
      const stats = await lstat(current);
      if (!stats.isDirectory() || stats.isSymbolicLink()) return false;
    } catch {
      return false;
    }
  }
  return true;
}

function scratchName(target: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.paperclip-sync-${randomBytes(4).toString("hex")}`);
}

async function writeEntry(source: string, target: string, entry: TreeEntry, local: TreeEntry | undefined): Promise<void> {
  if (entry.kind === "dir") {
    if (local && local.kind !== "dir") await unlink(target);
    await mkdir(target, { mode: entry.mode & 0o777 });
    return;
  }
  if (local?.kind === "dir") await rmdir(target); // base was an (empty) directory; the sandbox made it a file or link
  const scratch = scratchName(target);
  if (entry.kind === "symlink") {
    await symlink(entry.target!, scratch);
  } else {
    // Created with its final mode, exclusively: no window with wider permissions, no following links.
    const handle = await open(scratch, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, entry.mode & 0o777);
    try {
      await pipeline(createReadStream(source), createWriteStream("", { fd: handle.fd, autoClose: false }));
      await handle.chmod(entry.mode & 0o777);
    } finally {
      await handle.close();
    }
  }
  try {
    await rename(scratch, target);
  } catch (error) {
    await unlink(scratch).catch(() => undefined);
    throw error;
  }
}
