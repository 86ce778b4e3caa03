import fs from "node:fs/promises";
import { createReadStream, createWriteStream } from "node:fs";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract as extractTar } from "tar";
import type { ReadEntry } from "tar";
import { hostSafeMode, type ArchivePlan, type ModeFix } from "./archive-inspect.js";
import { SyncError } from "./errors.js";
import type { ExcludeMatcher } from "./exclude-glob.js";
import { ancestorsOf, normalizeMemberPath } from "./member-path.js";
import { spawnTar, systemTar, tarFailure } from "./system-tar.js";
import { REGULAR, TarFormatError, rewriteHeaderMode } from "./tar-parse.js";
import { UPLOAD_STAGE_PREFIX } from "./upload-scripts.js";

export interface LandHooks {
  /** Test seam: called with the staged path right before it is renamed onto the target. */
  beforeRename?: (stagedPath: string) => Promise<void> | void;
}

/**
 * Land an inspected archive on the host: clear setuid/setgid (and a file's sticky bit) in its
 * headers, drop excluded members and skipped links from it, extract it into a fresh 0700 staging
 * directory next to the target (same filesystem, so the final step is a rename), check that what
 * was extracted is exactly what was inspected, then move it into place. Nothing is readable by
 * others before it is complete and carries its final mode, and the staging directory is removed on
 * every path. The archive lives in our own 0600 scratch, so it is the very file that was inspected.
 * Extraction uses the host's GNU tar when there is one (sparse members land with their holes),
 * node-tar otherwise.
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
  // `.paperclip-upload*` names are reserved for sync scratch, on the host as in the sandbox.
  const staging = await fs.mkdtemp(path.join(parent, UPLOAD_STAGE_PREFIX)); // created 0700
  try {
    const tree = path.join(staging, "tree");
    await fs.mkdir(tree, { mode: 0o700 });
    await rewriteModes(archiveFile, plan.modeFixes);
    const archive = plan.droppedRanges.length === 0 ? archiveFile : await withoutRanges(archiveFile, plan.droppedRanges);
    const binary = await systemTar();
    if (binary === null) await extractInto(archive, tree, options.matcher);
    else await extractWithSystemTar(binary, archive, tree);
    await verifyExtractedTree(tree, plan);
    if (kind === "file") {
      const member = plan.fileMember;
      if (member === undefined) throw new SyncError("SYNC_ARCHIVE_UNSAFE", "no file member to land");
      const staged = path.join(tree, member.path);
      const st = await fs.lstat(staged);
      if (!st.isFile()) throw new SyncError("SYNC_ARCHIVE_UNSAFE", "the file member did not extract as a regular file");
      // The mapping's mode wins over the archived one, but cannot add setuid/setgid/sticky either.
      await fs.chmod(staged, safeMode(options.mode ?? member.mode, false) ?? 0o600);
      await options.hooks?.beforeRename?.(staged);
      await fs.rename(staged, target);
    } else {
      const rootMode = safeMode(options.mode ?? plan.rootMode, true);
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

/**
 * Write each fix's mode into its member header (and the header's checksum) in place, so that no
 * extractor ever creates a setuid/setgid file from this archive: not under its inspected name, and
 * not under a hardlink to an inode whose name a later member re-declares. A header that is not the
 * one inspected (wrong checksum) is a host failure, never extracted.
 */
async function rewriteModes(archiveFile: string, fixes: readonly ModeFix[]): Promise<void> {
  if (fixes.length === 0) return;
  const handle = await fs.open(archiveFile, "r+");
  try {
    const header = Buffer.alloc(512);
    for (const { headerAt, mode } of fixes) {
      const { bytesRead } = await handle.read(header, 0, 512, headerAt);
      try {
        if (bytesRead !== 512) throw new TarFormatError("short header");
        rewriteHeaderMode(header, mode, headerAt);
      } catch (error) {
        throw new SyncError("SYNC_HOST_FAILED", `the spooled archive changed at byte ${headerAt}`, { cause: error });
      }
      await handle.write(header, 0, 512, headerAt);
    }
  } finally {
    await handle.close();
  }
}

/** A copy of the archive without the given member ranges (excluded members, skipped links), next to it. */
async function withoutRanges(archiveFile: string, ranges: [number, number][]): Promise<string> {
  const kept = `${archiveFile}.kept`;
  let offset = 0;
  let next = 0;
  const filter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      const chunkEnd = offset + chunk.length;
      let position = offset;
      while (position < chunkEnd) {
        const range = ranges[next];
        if (range === undefined || range[0] >= chunkEnd) {
          this.push(chunk.subarray(position - offset));
          position = chunkEnd;
        } else if (position < range[0]) {
          this.push(chunk.subarray(position - offset, range[0] - offset));
          position = range[0];
        } else {
          position = Math.min(range[1], chunkEnd);
          if (position === range[1]) next++;
        }
      }
      offset = chunkEnd;
      callback();
    },
  });
  await pipeline(
    createReadStream(archiveFile, { highWaterMark: 256 * 1024 }),
    filter,
    createWriteStream(kept, { flags: "wx", mode: 0o600, highWaterMark: 1024 * 1024 }),
  );
  return kept;
}

/**
 * GNU tar into the fresh staging tree: recorded modes without the umask (`-p`), no owners, no
 * xattrs/ACLs/SELinux labels, the existing (0700) tree directory left as is, `--force-local` so a
 * `:` in the scratch path is never taken for a remote archive. Its own safeguards stay on (no
 * `-P`: no absolute names, no `..` members, delayed creation of symlinks that climb).
 */
async function extractWithSystemTar(binary: string, archive: string, tree: string): Promise<void> {
  const tar = spawnTar(binary, [
    "-x",
    "--force-local",
    "-f",
    archive,
    "-C",
    tree,
    "-p",
    "--no-same-owner",
    "--no-overwrite-dir",
    "--no-xattrs",
    "--no-acls",
    "--no-selinux",
    "--warning=no-timestamp",
    "--warning=no-unknown-keyword",
  ]);
  tar.child.stdin.end();
  tar.child.stdout.resume();
  const code = await tar.exited;
  if (code !== 0) throw new SyncError("SYNC_HOST_FAILED", `extracting the outbound archive failed (${tarFailure(code, tar.stderr)})`);
}

/**
 * Defence in depth against any difference between our reading of the archive and the extractor's:
 * the staging tree may only hold inspected members (directories may also be their ancestors), each
 * with its inspected type, symlinks with their inspected target. One readdir per directory, a
 * readlink per symlink; a directory without owner read/search is opened up for the walk only.
 */
async function verifyExtractedTree(tree: string, plan: ArchivePlan): Promise<void> {
  const ancestors = new Set<string>();
  for (const memberPath of plan.members.keys()) for (const a of ancestorsOf(memberPath)) ancestors.add(a);
  const unexpected = (rel: string, why: string): never => {
    throw new SyncError("SYNC_ARCHIVE_UNSAFE", `extraction produced ${JSON.stringify(rel.slice(0, 200))}, ${why}; refusing the archive`);
  };
  const stack = [""];
  while (stack.length > 0) {
    const rel = stack.pop() as string;
    for (const entry of await readdirOpening(rel === "" ? tree : path.join(tree, rel))) {
      const child = rel === "" ? entry.name : `${rel}/${entry.name}`;
      const planned = plan.members.get(child);
      if (entry.isDirectory()) {
        if (planned === undefined ? !ancestors.has(child) : planned.type !== "Directory") unexpected(child, "which is not a directory of the archive");
        stack.push(child);
      } else if (entry.isSymbolicLink()) {
        if (planned?.type !== "SymbolicLink") unexpected(child, "which is not a symlink of the archive");
        if ((await fs.readlink(path.join(tree, child))) !== planned?.linkpath) unexpected(child, "whose target differs from the archive's");
      } else if (entry.isFile()) {
        if (planned === undefined || !(REGULAR.has(planned.type) || planned.type === "Link")) unexpected(child, "which is not a file of the archive");
      } else {
        unexpected(child, "which has a type the archive does not declare");
      }
    }
  }
}

async function readdirOpening(dir: string) {
  try {
    return await fs.readdir(dir, { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EACCES") throw error;
    const { mode } = await fs.lstat(dir);
    await fs.chmod(dir, mode | 0o700);
    try {
      return await fs.readdir(dir, { withFileTypes: true });
    } finally {
      await fs.chmod(dir, mode & 0o7777);
    }
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
      if (rel !== "" && mode !== undefined && (dir || REGULAR.has(readEntry.type))) {
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

/** `hostSafeMode` for a mode that may be missing. */
function safeMode(mode: number | undefined, dir: boolean): number | undefined {
  if (mode === undefined || !Number.isFinite(mode)) return undefined;
  return hostSafeMode(mode, dir);
}
