import type { PluginEnvironmentSyncResult, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { FileTransport, ScriptRunner } from "../transport.js";
import { base64SyncIn, base64SyncOut, DEFAULT_BASE64_CHUNK_BYTES } from "./base64-sync.js";
import { SyncError } from "./errors.js";
import { downloadStagesCleanupScript, fileApiSyncIn, fileApiSyncOut, type FileApiSyncOptions } from "./file-api-sync.js";
import type { SyncOptions } from "./options.js";
import { runnerFileTransport } from "./runner-file-transport.js";
import { syncIn } from "./sync-in.js";
import { syncOut } from "./sync-out.js";

export type SyncStrategyKind = "stream" | "file-api" | "base64";

export interface SyncStrategy {
  kind: SyncStrategyKind;
  syncIn(operations: PluginSyncOperation[], opts: SyncOptions): Promise<PluginEnvironmentSyncResult>;
  syncOut(operations: PluginSyncOperation[], opts: SyncOptions): Promise<PluginEnvironmentSyncResult>;
  /**
   * Removes what this strategy left in the sandbox (the file API's download stages; nothing for
   * the others), e.g. before a kept sandbox stops. One call, and only when something was left.
   */
  dispose(): Promise<void>;
}

export interface SyncForOptions {
  /** For the file-API strategy: where uploads land before a script moves them (default /tmp). */
  uploadScratchDir?: string;
  /**
   * Use the file API even over a runner that could stream: for an exec API where every stdin chunk
   * is a vendor call of its own, while the file API moves a whole archive in one.
   */
  prefer?: "file-api";
  /**
   * Asked per file move where the runner could stream but the file API was preferred: true when
   * the runner's commands cost no vendor call now (the lease's command channel is ready), so an
   * archive up to `freeStreamMaxBytes` moves over the runner (`cat`) instead of the file API; the
   * scripts around it are the file-API strategy's either way. A channel that breaks mid-move costs
   * nothing extra here: a command it never started runs as a vendor exec, once (the runner streams
   * either way), and one it did fails as a broken exec does.
   */
  streamsFree?: () => boolean;
  /** Largest archive moved over the runner when `streamsFree` (bytes, default 2 MiB): above it the file API's throughput wins. */
  freeStreamMaxBytes?: number;
}

/** Over envd the channel moves ~30 MB/s, about half the file API's: past ~2 MiB the call it saves costs more. */
const FREE_STREAM_MAX_BYTES = 2 * 1024 * 1024;

/** Bytes of script around a base64 chunk (stage checks, the append command). */
const BASE64_SCRIPT_OVERHEAD = 8 * 1024;

/**
 * The sync strategy a transport can carry safely, made once per lease (it remembers what it left in
 * the sandbox; `runner` may be a function giving the lease's current runner):
 * - `stream`: tar over stdin/stdout, one or two calls per mapping — only over a binary-safe,
 *   streamed-stdin transport with EOF;
 * - `file-api`: the vendor's file API moves archives, one script confines and installs them — two
 *   calls per operation (none for a small archive when `streamsFree()`: it moves over the runner);
 * - `base64`: chunks of base64 over exec (ASCII, so any transport carries it), sized to the
 *   transport's stdin or script limit.
 */
export function syncFor(runner: ScriptRunner | (() => ScriptRunner), files?: FileTransport, options: SyncForOptions = {}): SyncStrategy {
  const current = typeof runner === "function" ? runner : () => runner;
  const caps = current().capabilities;
  const nothingLeft = async () => undefined;
  const streams = caps.stdin === "stream" && caps.binarySafe && caps.stdinEof;
  if (streams && !(options.prefer === "file-api" && files)) {
    return { kind: "stream", syncIn: (ops, opts) => syncIn(current(), ops, opts), syncOut: (ops, opts) => syncOut(current(), ops, opts), dispose: nothingLeft };
  }
  if (files) {
    const withScratch = (opts: SyncOptions): FileApiSyncOptions => ({ ...opts, ...(options.uploadScratchDir ? { uploadScratchDir: options.uploadScratchDir } : {}) });
    const stages = new Set<string>();
    let staged = false;
    // Only over a runner that streams anyway: a move it could not carry would have no fallback.
    const free = options.streamsFree;
    const mover = streams && free ? sizedFileMover(files, runnerFileTransport(current), free, options.freeStreamMaxBytes ?? FREE_STREAM_MAX_BYTES) : files;
    return {
      kind: "file-api",
      syncIn: (ops, opts) => fileApiSyncIn(current(), mover, ops, withScratch(opts)),
      syncOut: (ops, opts) => {
        staged = true;
        return fileApiSyncOut(current(), mover, ops, opts, stages);
      },
      async dispose() {
        if (!staged) return;
        staged = false;
        stages.clear();
        await current().run(downloadStagesCleanupScript(), {});
      },
    };
  }
  if (caps.stdin === "none") {
    throw new SyncError("SYNC_TRANSPORT_UNSUITABLE", "this transport has no stdin and no file API: wrap it with createFileStdioRunner");
  }
  const chunkBytes = base64ChunkFor(current());
  return {
    kind: "base64",
    syncIn: (ops, opts) => base64SyncIn(current(), ops, { ...opts, chunkBytes }),
    syncOut: (ops, opts) => base64SyncOut(current(), ops, { ...opts, chunkBytes }),
    dispose: nothingLeft,
  };
}

/** Decoded bytes per call that keep one chunk's base64 under the transport's stdin (or script) limit. */
export function base64ChunkFor(runner: ScriptRunner): number {
  const limit = runner.capabilities.maxStdinBytes;
  if (limit === undefined) return DEFAULT_BASE64_CHUNK_BYTES;
  const usable = Math.floor(((limit - BASE64_SCRIPT_OVERHEAD) * 3) / 4);
  if (usable < 1024) throw new SyncError("SYNC_TRANSPORT_UNSUITABLE", `this transport's stdin limit (${limit} bytes) is too small for base64 sync`);
  return Math.min(DEFAULT_BASE64_CHUNK_BYTES, usable - (usable % 3));
}

/** Moves a file of known size up to `maxBytes` over `overRunner` while `free()`, else through the vendor's `files`. */
function sizedFileMover(files: FileTransport, overRunner: FileTransport, free: () => boolean, maxBytes: number): FileTransport {
  const small = (size: number | undefined) => size !== undefined && size <= maxBytes && free();
  return {
    ...(files.maxUploadBytes !== undefined ? { maxUploadBytes: files.maxUploadBytes } : {}),
    upload: (path, source, opts) => (small(opts?.size) ? overRunner : files).upload(path, source, opts),
    download: (path, opts) => (small(opts?.size) ? overRunner : files).download(path, opts),
  };
}
