import fs from "node:fs/promises";
import path from "node:path";
import { Writable } from "node:stream";
import { extract as extractTar } from "tar";
import type { ReadEntry } from "tar";
import { createArchiveInspector, hostSafeMode, type ArchiveInspector, type ArchivePlan, type MemberVerdict } from "./archive-inspect.js";
import { SyncError } from "./errors.js";
import type { ExcludeMatcher } from "./exclude-glob.js";
import { ancestorsOf, normalizeMemberPath } from "./member-path.js";
import { spawnTar, systemTar, tarFailure } from "./system-tar.js";
import { REGULAR, rewriteHeaderMode } from "./tar-parse.js";
import { UPLOAD_STAGE_PREFIX } from "./upload-scripts.js";

export interface LandHooks {
  /** Test seam: called with the staged path right before it is renamed onto the target. */
  beforeRename?: (stagedPath: string) => Promise<void> | void;
}

export interface LandingOptions {
  kind: "file" | "directory";
  /** The mapping's excludes: excluded members are never extracted. */
  matcher: ExcludeMatcher;
  /** Accept GNU tar's sparse members (only when the host's GNU tar extracts them). */
  gnuSparse: boolean;
  /** The mapping's mode, which wins over the archived one (never with setuid/setgid). */
  mode: number | undefined;
  /** Archive bytes accepted; past them the landing stops (`overLimit`, `stopSignal`). */
  limitBytes: number;
  hooks?: LandHooks | undefined;
}

/**
 * Undecided bytes held at most: a member's metadata headers and sparse map, before its verdict.
 * Metadata bodies are at most 1 MiB (TarParser); only a sparse map of millions of runs gets here.
 */
const MAX_HELD_BYTES = 64 * 1024 * 1024;
/** Of the zeros after the end-of-archive marker, what is passed on (one 20-block tar record). */
const END_HELD_BYTES = 10240;
/** How long an extractor whose input was cut short may take to exit before it is killed. */
const STOP_GRACE_MS = 5000;

/**
 * The host half of every sync-out: a sink the archive is written into as it arrives. Each member
 * is inspected the moment its header arrives and only what is accepted goes on to the extractor
 * (GNU tar when the host has it, node-tar otherwise), into a fresh 0700 staging directory next to
 * the target; setuid/setgid bits are cleared in the headers on the way (so no extractor ever
 * creates them, not even under a hardlink to a re-declared name), excluded members and symlinks
 * never reach it. Symlinks are judged once the whole archive is known: the safe ones are created by
 * `land()` after extraction, so while the extractor runs the staging tree holds no symlink that a
 * later member could be written through. Nothing is buffered beyond one member's headers, and no
 * archive is spooled to disk. `land()` then checks the extracted tree against the plan and renames
 * it into place; on any refusal or failure the staging directory goes (`dispose()`, always).
 *
 * Failures never surface as stream errors (a runner piping into this sink must not see one):
 * past `limitBytes` the sink sets `overLimit`, an extractor that dies sets `hostError`, and both
 * fire `stopSignal` so the fetch can stop; bytes after that are counted and dropped.
 */
export class ArchiveLanding extends Writable {
  readonly #target: string;
  readonly #options: LandingOptions;
  readonly #inspector: ArchiveInspector;
  readonly #stop = new AbortController();
  readonly #verdicts: MemberVerdict[] = [];
  readonly #held: Buffer[] = [];
  #heldBytes = 0;
  /** Archive offset of the first held byte. */
  #offset = 0;
  #bytes = 0;
  #overLimit = false;
  #hostError: SyncError | undefined;
  #tooManyHeld = false;
  #extraction: Promise<Extraction> | undefined;
  #extracting = true;
  #staging: string | undefined;

  constructor(target: string, options: LandingOptions) {
    // Up to 1 MiB queued while the extractor is busy: it then gets the lot in one write.
    super({ highWaterMark: 1024 * 1024 });
    this.#target = target;
    this.#options = options;
    this.#inspector = createArchiveInspector(options.kind, options.matcher, { gnuSparse: options.gnuSparse }, (verdict) => this.#verdicts.push(verdict));
  }

  /** Fires once receiving should stop: over the limit, or the extractor failed. */
  get stopSignal(): AbortSignal {
    return this.#stop.signal;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get overLimit(): boolean {
    return this.#overLimit;
  }

  /** Why the host side could not go on (SYNC_HOST_FAILED, or SYNC_TARGET_INVALID from the target checks). */
  get hostError(): SyncError | undefined {
    return this.#hostError;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#flush(this.#accept(chunk), callback);
  }

  // Chunks that queued up while the extractor was busy go on together, in one write.
  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    const parts: Buffer[] = [];
    for (const { chunk } of chunks) parts.push(...this.#accept(chunk));
    this.#flush(parts, callback);
  }

  /**
   * Counts and inspects one chunk, and returns what of it (and of the bytes held before it) is now
   * decided for the extractor; the undecided rest stays held. Nothing once extraction stopped.
   */
  #accept(chunk: Buffer): Buffer[] {
    this.#bytes += chunk.length;
    if (this.#overLimit || this.#hostError !== undefined) return [];
    if (this.#bytes > this.#options.limitBytes) {
      this.#overLimit = true;
      this.#stopExtracting();
      this.#stop.abort();
      return [];
    }
    this.#inspector.write(chunk);
    if (!this.#extracting) return [];
    if (this.#inspector.refused) {
      // The plan will refuse the archive: inspect the rest (to name every problem), extract nothing more.
      this.#stopExtracting();
      return [];
    }
    // After the end-of-archive marker only zeros follow (the inspector refuses anything else): keep a record's worth.
    if (this.#inspector.ended && this.#verdicts.length === 0 && this.#heldBytes >= END_HELD_BYTES) return [];
    this.#held.push(chunk);
    this.#heldBytes += chunk.length;
    if (this.#heldBytes > MAX_HELD_BYTES) {
      this.#tooManyHeld = true;
      this.#stopExtracting();
      return [];
    }
    return this.#route();
  }

  /** Hands `parts` to the extractor (started on the first), then lets the next chunks come. */
  #flush(parts: Buffer[], callback: (error?: Error | null) => void): void {
    // A later chunk of the same batch may have stopped extraction: then nothing more goes.
    if (parts.length === 0 || !this.#extracting) return callback();
    this.#startExtraction()
      .then((extraction) => extraction.write(parts))
      .then(
        () => callback(),
        (error: unknown) => {
          this.#fail(error);
          callback();
        },
      );
  }

  /** Ends the input (if the fetch did not) and waits until every byte written has been handled. */
  async finished(): Promise<void> {
    // A pipeline that failed destroys its destination: nothing more will come, and no "finish".
    if (this.destroyed || this.writableFinished) return;
    if (!this.writableEnded) this.end();
    await new Promise<void>((resolve) => {
      this.once("finish", resolve);
      this.once("close", resolve);
      this.once("error", () => resolve());
    });
  }

  /**
   * After `finished()`, with no limit or host failure: the plan (or SYNC_ARCHIVE_UNSAFE), the
   * extraction completed and checked against it, the safe symlinks created, and the result renamed
   * onto the target.
   */
  async land(): Promise<ArchivePlan> {
    const plan = this.#inspector.finish();
    if (this.#tooManyHeld) throw new SyncError("SYNC_ARCHIVE_UNSAFE", `refusing the outbound archive: a member's headers exceed ${MAX_HELD_BYTES} bytes`);
    const extraction = await this.#startExtraction();
    // What is still held is the end-of-archive marker (the plan saw the archive end cleanly).
    await extraction.write(this.#held.splice(0));
    this.#heldBytes = 0;
    await extraction.end();
    await createLinks(extraction.tree, plan);
    await verifyExtractedTree(extraction.tree, plan);
    await this.#moveIntoPlace(extraction.tree, plan);
    return plan;
  }

  /** Stops the extractor if it still runs and removes the staging directory. Always call it. */
  async dispose(): Promise<void> {
    this.#stopExtracting();
    if (!this.writableFinished) this.destroy();
    const extraction = await this.#extraction?.catch(() => undefined);
    if (extraction !== undefined) {
      // Its input is ended: it stops by itself; a stuck one is killed.
      const stuck = setTimeout(() => extraction.kill(), STOP_GRACE_MS);
      await extraction.exited;
      clearTimeout(stuck);
    }
    if (this.#staging !== undefined) await fs.rm(this.#staging, { recursive: true, force: true });
  }

  #stopExtracting(): void {
    this.#extracting = false;
    this.#held.length = 0;
    this.#heldBytes = 0;
    // Ended, not killed: everything handed over so far reaches the extractor (the staging goes anyway).
    void this.#extraction?.then(
      (extraction) => extraction.stop(),
      () => undefined,
    );
  }

  #fail(error: unknown): void {
    // The extractor's own SyncErrors (and the target checks', e.g. SYNC_TARGET_INVALID) stay as they are.
    this.#hostError ??= error instanceof SyncError ? error : new SyncError("SYNC_HOST_FAILED", "extracting the outbound archive failed", { cause: error });
    this.#stopExtracting();
    this.#stop.abort();
  }

  /** The decided bytes for the extractor, in order (dropped ones left out); the undecided rest stays held. */
  #route(): Buffer[] {
    const out: Buffer[] = [];
    while (this.#heldBytes > 0) {
      const verdict = this.#verdicts[0];
      if (verdict === undefined) break;
      const { member } = verdict;
      const extract = verdict.action === "extract";
      if (extract && verdict.fixMode !== undefined && this.#offset <= member.headerAt) {
        // The header is held whole: its verdict came once it was read.
        out.push(...this.#take(member.headerAt - this.#offset));
        const header = Buffer.concat(this.#take(512));
        rewriteHeaderMode(header, verdict.fixMode, member.headerAt);
        out.push(header);
        delete verdict.fixMode;
        continue;
      }
      const parts = this.#take(Math.min(member.end - this.#offset, this.#heldBytes));
      if (extract) out.push(...parts);
      if (this.#offset === member.end) this.#verdicts.shift();
    }
    return out;
  }

  /** Removes the first `n` held bytes (all of them held) and returns them. */
  #take(n: number): Buffer[] {
    const out: Buffer[] = [];
    let left = n;
    while (left > 0) {
      const first = this.#held[0] as Buffer;
      if (first.length <= left) {
        out.push(first);
        this.#held.shift();
        left -= first.length;
      } else {
        out.push(first.subarray(0, left));
        this.#held[0] = first.subarray(left);
        left = 0;
      }
    }
    this.#heldBytes -= n;
    this.#offset += n;
    return out;
  }

  /** Staging and extractor, made when the first accepted byte arrives (a fetch that fails first leaves nothing). */
  #startExtraction(): Promise<Extraction> {
    this.#extraction ??= (async () => {
      const parent = path.dirname(this.#target);
      await fs.mkdir(parent, { recursive: true });
      if (this.#options.kind === "file") await assertReplaceableByFile(this.#target);
      // `.paperclip-upload*` names are reserved for sync scratch, on the host as in the sandbox.
      this.#staging = await fs.mkdtemp(path.join(parent, UPLOAD_STAGE_PREFIX)); // created 0700
      const tree = path.join(this.#staging, "tree");
      await fs.mkdir(tree, { mode: 0o700 });
      const binary = await systemTar();
      return binary === null ? nodeTarExtraction(tree) : gnuTarExtraction(binary, tree);
    })();
    return this.#extraction;
  }

  async #moveIntoPlace(tree: string, plan: ArchivePlan): Promise<void> {
    const { kind, mode, hooks } = this.#options;
    if (kind === "file") {
      const member = plan.fileMember;
      if (member === undefined) throw new SyncError("SYNC_ARCHIVE_UNSAFE", "no file member to land");
      const staged = path.join(tree, member.path);
      const st = await fs.lstat(staged);
      if (!st.isFile()) throw new SyncError("SYNC_ARCHIVE_UNSAFE", "the file member did not extract as a regular file");
      // The mapping's mode wins over the archived one, but cannot add setuid/setgid/sticky either.
      await fs.chmod(staged, safeMode(mode ?? member.mode, false) ?? 0o600);
      await hooks?.beforeRename?.(staged);
      await fs.rename(staged, this.#target);
    } else {
      const rootMode = safeMode(mode ?? plan.rootMode, true);
      if (rootMode !== undefined) await fs.chmod(tree, rootMode);
      await hooks?.beforeRename?.(tree);
      // Directory mappings are destroy-then-replace (not atomic), as the contract says.
      await fs.rm(this.#target, { recursive: true, force: true });
      await fs.rename(tree, this.#target);
    }
  }
}

/** An extractor fed the accepted bytes in order. */
interface Extraction {
  tree: string;
  /** Resolves once the extractor took the bytes (backpressure); SYNC_HOST_FAILED if it is gone. */
  write(parts: Buffer[]): Promise<void>;
  /** No more input: resolves once the extraction completed, SYNC_HOST_FAILED otherwise. */
  end(): Promise<void>;
  /** No more input, nothing awaited (the extraction is being thrown away). */
  stop(): void;
  kill(): void;
  /** Settles (never rejects) once the extractor is gone. */
  exited: Promise<unknown>;
}

/**
 * GNU tar from stdin into the fresh staging tree: recorded modes without the umask (`-p`), no
 * owners, no xattrs/ACLs/SELinux labels, the existing (0700) tree directory left as is. Its own
 * safeguards stay on (no `-P`: no absolute names, no `..` members), under ours.
 */
function gnuTarExtraction(binary: string, tree: string): Extraction {
  const tar = spawnTar(binary, [
    "-x",
    "-f",
    "-",
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
  tar.child.stdout.resume();
  let gone = false;
  void tar.exited.then(() => {
    gone = true;
  });
  const failed = async (): Promise<never> => {
    const code = await tar.exited;
    throw new SyncError("SYNC_HOST_FAILED", `extracting the outbound archive failed (${tarFailure(code, tar.stderr)})`);
  };
  const stdin = tar.child.stdin;
  return {
    tree,
    async write(parts) {
      if (gone) return failed();
      // One writev for the lot.
      stdin.cork();
      for (const part of parts) stdin.write(part);
      stdin.uncork();
      if (!stdin.writableNeedDrain) return;
      const drained = await Promise.race([new Promise<boolean>((resolve) => stdin.once("drain", () => resolve(true))), tar.exited.then(() => false)]);
      if (!drained) return failed();
    },
    async end() {
      stdin.end();
      const code = await tar.exited;
      if (code !== 0) return failed();
    },
    stop: () => {
      stdin.end();
    },
    kill: () => tar.kill(),
    exited: tar.exited,
  };
}

/**
 * node-tar with its own path protections on, plus ours (every member it gets was accepted). Entries
 * get owner read/write(/search) while extracting, so a 0400 directory cannot block its own children;
 * the recorded modes are applied at the end, files first, then directories deepest first.
 */
function nodeTarExtraction(tree: string): Extraction {
  const modes: { rel: string; mode: number; dir: boolean }[] = [];
  const unpack = extractTar({
    cwd: tree,
    strict: true,
    preservePaths: false,
    preserveOwner: false, // node-tar's default is true when running as root
    filter: (memberPath: string, entry: unknown) => {
      const rel = normalizeMemberPath(memberPath);
      if (rel === null) return false;
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
  let failure: unknown;
  let stopped = false;
  const exited = new Promise<void>((resolve) => {
    unpack.on("close", () => resolve());
    unpack.on("error", (error: unknown) => {
      failure ??= error;
      resolve();
    });
  });
  const failed = (): never => {
    throw new SyncError("SYNC_HOST_FAILED", "extracting the outbound archive failed", { cause: failure });
  };
  /** Until node-tar asks for more (or is gone), leaving no listener behind either way. */
  const drainedOrGone = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const done = () => {
        unpack.off("drain", done);
        unpack.off("close", done);
        unpack.off("error", done);
        resolve();
      };
      unpack.once("drain", done);
      unpack.once("close", done);
      unpack.once("error", done);
    });
  return {
    tree,
    async write(parts) {
      // One part at a time: node-tar adds a 'drain' listener to its current entry for every write
      // it answers `false`, so writing on past that piles up one listener per queued part.
      for (const part of parts) {
        if (failure !== undefined) failed();
        // Stopped while waiting: the rest is not wanted (the staging goes anyway).
        if (stopped) return;
        if (!unpack.write(part)) await drainedOrGone();
      }
      if (failure !== undefined) failed();
    },
    async end() {
      unpack.end();
      await exited;
      if (failure !== undefined) failed();
      const files = modes.filter((m) => !m.dir);
      const dirs = modes.filter((m) => m.dir).sort((a, b) => depth(b.rel) - depth(a.rel));
      for (const { rel, mode } of [...files, ...dirs]) {
        const abs = path.join(tree, rel);
        const st = await fs.lstat(abs).catch(() => undefined);
        if (st !== undefined && !st.isSymbolicLink()) await fs.chmod(abs, mode);
      }
    },
    stop: () => {
      stopped = true;
      unpack.end();
    },
    kill: () => {
      failure ??= new Error("stopped");
      unpack.abort(new Error("stopped"));
    },
    exited,
  };
}

/**
 * The archive's safe symlinks (the plan kept only those), created after extraction in archive
 * order with their archived time; their directories keep the times the extractor gave them. A
 * directory without owner write is opened up for the link only.
 */
async function createLinks(tree: string, plan: ArchivePlan): Promise<void> {
  for (const [rel, member] of plan.members) {
    if (member.type !== "SymbolicLink") continue;
    const link = path.join(tree, rel);
    const dir = path.dirname(link);
    await fs.mkdir(dir, { recursive: true });
    const st = await fs.lstat(dir);
    if (!st.isDirectory()) throw new SyncError("SYNC_ARCHIVE_UNSAFE", `symlink member ${JSON.stringify(rel.slice(0, 200))} lies below a non-directory`);
    const writable = (st.mode & 0o300) === 0o300;
    if (!writable) await fs.chmod(dir, st.mode | 0o300);
    try {
      await fs.symlink(member.linkpath, link);
      if (member.mtime !== undefined) await fs.lutimes(link, member.mtime, member.mtime);
    } finally {
      if (!writable) await fs.chmod(dir, st.mode & 0o7777);
      await fs.utimes(dir, st.atime, st.mtime);
    }
  }
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

function depth(rel: string): number {
  return rel.split("/").length;
}

/** `hostSafeMode` for a mode that may be missing. */
function safeMode(mode: number | undefined, dir: boolean): number | undefined {
  if (mode === undefined || !Number.isFinite(mode)) return undefined;
  return hostSafeMode(mode, dir);
}
