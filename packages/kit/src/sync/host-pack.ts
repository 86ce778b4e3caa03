import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { Readable, Transform, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { create as createTar } from "tar";
import type { WriteEntry } from "tar";
import { SyncError } from "./errors.js";
import { compileExcludes, type ExcludeMatcher } from "./exclude-glob.js";
import { spawnTar, systemTar, tarFailure } from "./system-tar.js";
import { REGULAR, TarParser } from "./tar-parse.js";

export interface TransferCounts {
  /** Regular files carried (hardlinks, symlinks and directories are not counted). */
  files: number;
  /** Content bytes of those files as carried (a sparse file's data, without its holes). */
  bytes: number;
}

export interface HostDirectoryPack {
  /** The tar byte stream (uncompressed: the sandbox may only have a bare tar). */
  stream: Readable;
  /** Filled in as entries are written; final once `finished()` has resolved without an error. */
  counts: TransferCounts;
  /** The first packing error so far (unreadable file, dangling link with `followSymlinks`...). */
  error(): Error | undefined;
  /**
   * Lets the rest of the archive flow (the receiver is done with it) and resolves once packing is
   * over, with the first packing error, if any.
   */
  finished(): Promise<Error | undefined>;
  /** Ends packing now (the receiver failed); errors caused by stopping are not reported. */
  stop(): void;
}

export interface PackOptions {
  exclude?: string[] | undefined;
  followSymlinks?: boolean | undefined;
  /** GNU tar `--sparse`: holes are left out of the archive (node-tar, which cannot, ignores this). */
  sparse?: boolean | undefined;
  /** Called once with the first packing error, while the stream may still be flowing. */
  onError?: (error: Error) => void;
}

/** Bytes buffered between the packer and the runner: enough to keep both busy, small enough to stay flat. */
const STREAM_HIGH_WATER_MARK = 256 * 1024;

/**
 * Stream a host directory as a tar archive rooted at `.`, like `tar -c [-h] -C source .`: modes and
 * symlinks are kept (or dereferenced with `followSymlinks`), excluded paths are skipped together
 * with everything below them. The kit walks the tree itself and applies `compileExcludes`, then
 * hands the resulting list to the host's GNU tar (`--null --no-recursion -T -`), so exclusion means
 * exactly the same with either packer; without GNU tar, node-tar packs (not in `portable` mode:
 * that would rewrite modes).
 */
export async function packHostDirectory(source: string, options: PackOptions): Promise<HostDirectoryPack> {
  const binary = await systemTar();
  return binary === null ? packWithNodeTar(source, options) : packWithSystemTar(binary, source, options);
}

/**
 * What both packers share: the first packing error (errors after `stop()` are the receiver's doing,
 * not the source's) and the handle they return.
 */
class PackState {
  readonly counts: TransferCounts = { files: 0, bytes: 0 };
  firstError: Error | undefined;
  stopped = false;

  constructor(private readonly onError: ((error: Error) => void) | undefined) {}

  readonly fail = (error: unknown): void => {
    if (this.stopped || this.firstError !== undefined) return;
    this.firstError = error instanceof Error ? error : new Error(String(error));
    this.onError?.(this.firstError);
  };

  handle(stream: Readable, done: Promise<Error | undefined>, stop: () => void): HostDirectoryPack {
    return {
      stream,
      counts: this.counts,
      error: () => this.firstError,
      finished: () => {
        if (!stream.destroyed) stream.resume();
        return done;
      },
      stop: () => {
        this.stopped = true;
        stop();
      },
    };
  }
}

function packWithSystemTar(binary: string, source: string, options: PackOptions): HostDirectoryPack {
  const state = new PackState(options.onError);
  const { counts, fail } = state;
  const matcher = compileExcludes(options.exclude);
  const follow = options.followSymlinks === true;
  const sparse = options.sparse === true;

  const args = ["-c", "-f", "-", "--format=gnu", "--null", "--no-unquote", "--verbatim-files-from", "--no-recursion", "-T", "-"];
  if (follow) args.push("-h");
  if (sparse) args.push("--sparse");
  const tar = spawnTar(binary, args, source);
  // Count what actually goes over the wire by reading the archive's own headers as they pass.
  const parser = new TarParser(
    (member) => {
      if (REGULAR.has(member.type)) {
        counts.files += 1;
        counts.bytes += member.size;
      }
    },
    { gnuSparse: sparse },
  );
  const stream = new Transform({
    highWaterMark: STREAM_HIGH_WATER_MARK,
    transform(chunk: Buffer, _encoding, callback) {
      try {
        parser.write(chunk);
      } catch (error) {
        fail(error);
      }
      callback(null, chunk);
    },
    flush(callback) {
      try {
        parser.end();
      } catch (error) {
        fail(error);
      }
      callback();
    },
  });
  tar.child.stdout.pipe(stream);
  stream.on("error", fail);

  const listing = writeFileList(tar.child.stdin, source, matcher, follow, () => state.stopped)
    .catch(fail)
    .finally(() => tar.child.stdin.end());
  const done = (async () => {
    const [code] = await Promise.all([tar.exited, listing]);
    if (code !== 0) fail(Object.assign(new Error(tarFailure(code, tar.stderr)), { code: "TAR_FAILED" }));
    if (!state.stopped && !stream.destroyed && !stream.readableEnded) {
      await new Promise<void>((resolve) => {
        stream.once("end", resolve);
        stream.once("close", resolve);
      });
    }
    return state.firstError;
  })();

  return state.handle(stream, done, () => {
    tar.kill();
    stream.destroy();
  });
}

/**
 * Depth-first walk of `source`, writing `./<relative path>` NUL-terminated for every member to
 * archive (`.` first). An excluded directory is not entered. With `follow`, a symlink to a
 * directory is walked like a directory (as `tar -h` archives it), a dangling one is an error
 * (ENOENT), and one leading back to a directory being walked is a loop (ELOOP). Sockets are left
 * out (tar cannot archive them).
 */
async function writeFileList(stdin: Writable, source: string, matcher: ExcludeMatcher, follow: boolean, stopped: () => boolean): Promise<void> {
  const write = (name: string): Promise<void> | undefined => {
    if (stopped() || stdin.destroyed) throw Object.assign(new Error("tar stopped reading its file list"), { code: "EPIPE" });
    return stdin.write(`${name}\0`) ? undefined : drained(stdin);
  };
  const rootKey = follow ? dirKey(await fsp.stat(source)) : "";
  const stack: { rel: string; ancestors: string[] }[] = [{ rel: "", ancestors: [rootKey] }];
  await write(".");
  while (stack.length > 0) {
    const { rel, ancestors } = stack.pop() as { rel: string; ancestors: string[] };
    const entries = await fsp.readdir(rel === "" ? source : path.join(source, rel), { withFileTypes: true });
    for (const entry of entries) {
      const childRel = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (matcher.matchesItself(childRel)) continue;
      let isDir = entry.isDirectory();
      let isSocket = entry.isSocket();
      let key = "";
      if (follow && (isDir || entry.isSymbolicLink())) {
        const stat = await fsp.stat(path.join(source, childRel)); // ENOENT: a dangling link
        isDir = stat.isDirectory();
        isSocket = stat.isSocket();
        key = dirKey(stat);
        if (isDir && ancestors.includes(key)) {
          throw Object.assign(new Error(`symlink loop at ${childRel}`), { code: "ELOOP", path: path.join(source, childRel) });
        }
      }
      if (isSocket) continue;
      await write(`./${childRel}`);
      if (isDir) stack.push({ rel: childRel, ancestors: follow ? [...ancestors, key] : ancestors });
    }
  }
}

function dirKey(stat: { dev: number; ino: number }): string {
  return `${stat.dev}:${stat.ino}`;
}

function drained(stream: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      stream.off("drain", onDrain);
      stream.off("close", onClose);
    };
    const onDrain = () => {
      cleanup();
      resolve();
    };
    const onClose = () => {
      cleanup();
      reject(Object.assign(new Error("tar stopped reading its file list"), { code: "EPIPE" }));
    };
    stream.on("drain", onDrain);
    stream.on("close", onClose);
  });
}

function packWithNodeTar(source: string, options: PackOptions): HostDirectoryPack {
  const state = new PackState(options.onError);
  const { counts, fail } = state;
  const matcher = compileExcludes(options.exclude);
  const pack = createTar(
    {
      cwd: source,
      follow: options.followSymlinks === true,
      // Pack passes "./a/b"; the matcher wants "a/b". Returning false for a directory also keeps
      // tar from descending into it.
      filter: (entryPath: string) => !matcher.matchesItself(entryPath.replace(/^\.\//, "")),
      onWriteEntry: (entry: WriteEntry) => {
        if (entry.type === "File") {
          counts.files += 1;
          counts.bytes += entry.stat?.size ?? 0;
        }
      },
    },
    ["."],
  );
  pack.on("error", fail);
  const stream = Readable.from(pack, { objectMode: false, highWaterMark: STREAM_HIGH_WATER_MARK });
  stream.on("error", fail);
  const done = new Promise<Error | undefined>((resolve) => {
    const settle = () => resolve(state.firstError);
    stream.once("end", settle);
    stream.once("close", settle);
  });
  return state.handle(stream, done, () => stream.destroy());
}

/**
 * Packs `source` into a new file `archive` (0600, must not exist) and returns the counts and its
 * size: for transfers that need the whole archive, and its size, before sending any of it.
 */
export async function packHostDirectoryToFile(source: string, archive: string, options: PackOptions): Promise<TransferCounts & { archiveBytes: number }> {
  const pack = await packHostDirectory(source, options);
  let packError: Error | undefined;
  try {
    await pipeline(pack.stream, fs.createWriteStream(archive, { flags: "wx", mode: 0o600 }));
    packError = await pack.finished();
  } catch (error) {
    pack.stop();
    packError = pack.error() ?? (error instanceof Error ? error : new Error(String(error)));
  }
  if (packError !== undefined) throw new SyncError("SYNC_SOURCE_INVALID", `packing ${source} failed`, { cause: packError });
  const { size } = await fsp.stat(archive);
  return { ...pack.counts, archiveBytes: size };
}
