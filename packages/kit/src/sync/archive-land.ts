import fs from "node:fs/promises";
import path from "node:path";
import { extract as extractTar } from "tar";
import type { ReadEntry } from "tar";
import type { ArchivePlan } from "./archive-inspect.js";
import { SyncError } from "./errors.js";
import type { ExcludeMatcher } from "./exclude-glob.js";
import { normalizeMemberPath } from "./member-path.js";

/** Prefix of staging directories; `.paperclip-upload*` names are reserved for sync scratch. */
export const STAGING_PREFIX = ".paperclip-upload.";

export interface LandHooks {
  /** Test seam: called with the staged path right before it is renamed onto the target. */
  beforeRename?: (stagedPath: string) => Promise<void> | void;
}

/**
 * Land an inspected archive on the host: extract it into a fresh 0700 staging directory next to
 * the target (same filesystem, so the final step is a rename), fix modes there, then move it into
 * place. Nothing is readable by others before it is complete and carries its final mode, and the
 * staging directory is removed on every path.
 */
export async function landArchive(
  archiveFile: string,
  target: string,
  kind: "file" | "directory",
  plan: ArchivePlan,
  options: { mode: number | undefined; matcher: ExcludeMatcher; hooks?: LandHooks | undefined },
): Promise<void> {
  const parent = path.dirname(target);
  await fs.mkdir(parent, { recursive: true });
  if (kind === "file") await assertReplaceableByFile(target);
  const staging = await fs.mkdtemp(path.join(parent, STAGING_PREFIX)); // created 0700
  try {
    const tree = path.join(staging, "tree");
    await fs.mkdir(tree, { mode: 0o700 });
    await extractInto(archiveFile, tree, options.matcher);
    if (kind === "file") {
      const member = plan.fileMember;
      if (member === undefined) throw new SyncError("SYNC_ARCHIVE_UNSAFE", "no file member to land");
      const staged = path.join(tree, member.path);
      const st = await fs.lstat(staged);
      if (!st.isFile()) throw new SyncError("SYNC_ARCHIVE_UNSAFE", "the file member did not extract as a regular file");
      await fs.chmod(staged, options.mode ?? safeMode(member.mode, false) ?? 0o600);
      await options.hooks?.beforeRename?.(staged);
      await fs.rename(staged, target);
    } else {
      const rootMode = options.mode ?? safeMode(plan.rootMode, true);
      if (rootMode !== undefined) await fs.chmod(tree, rootMode);
      await options.hooks?.beforeRename?.(tree);
      // Directory mappings are destroy-then-replace (not atomic), as the contract says.
      await fs.rm(target, { recursive: true, force: true });
      await fs.rename(tree, target);
    }
  } finally {
    await fs.rm(staging, { recursive: true, force: true });
  }
}

async function assertReplaceableByFile(target: string): Promise<void> {
  const st = await fs.lstat(target).catch(() => undefined);
  if (st?.isDirectory()) {
    throw new SyncError("SYNC_TARGET_INVALID", `host target ${target} is a directory, the mapping is a file`);
  }
}

/**
 * Extract with node-tar's own path protections on, plus ours: every member was already inspected.
 * Entries get owner read/write(/search) while extracting, so a 0400 directory cannot block its own
 * children; the recorded modes are applied afterwards, files first, then directories deepest first.
 */
async function extractInto(archiveFile: string, tree: string, matcher: ExcludeMatcher): Promise<void> {
  const modes: { rel: string; mode: number; dir: boolean }[] = [];
  await extractTar({
    file: archiveFile,
    cwd: tree,
    strict: true,
    preservePaths: false,
    preserveOwner: false, // node-tar's default is true when running as root
    filter: (memberPath: string, entry: unknown) => {
      const rel = normalizeMemberPath(memberPath);
      if (rel === null) return false;
      if (rel !== "" && matcher.excludes(rel)) return false;
      const readEntry = entry as ReadEntry;
      const dir = readEntry.type === "Directory";
      const mode = safeMode(readEntry.mode, dir);
      if (rel !== "" && mode !== undefined && (dir || readEntry.type === "File" || readEntry.type === "OldFile" || readEntry.type === "ContiguousFile")) {
        modes.push({ rel, mode, dir });
        readEntry.mode = mode | (dir ? 0o700 : 0o600);
      }
      return true;
    },
  });
  const files = modes.filter((m) => !m.dir);
  const dirs = modes.filter((m) => m.dir).sort((a, b) => depth(b.rel) - depth(a.rel));
  for (const { rel, mode } of [...files, ...dirs]) {
    const abs = path.join(tree, rel);
    const st = await fs.lstat(abs).catch(() => undefined);
    if (st !== undefined && !st.isSymbolicLink()) await fs.chmod(abs, mode);
  }
}

function depth(rel: string): number {
  return rel.split("/").length;
}

/**
 * Modes from the sandbox, minus setuid/setgid: those bits would mean something on the host.
 * (The sticky bit is kept on directories.)
 */
function safeMode(mode: number | undefined, dir: boolean): number | undefined {
  if (mode === undefined || !Number.isFinite(mode)) return undefined;
  return mode & (dir ? 0o1777 : 0o777);
}
