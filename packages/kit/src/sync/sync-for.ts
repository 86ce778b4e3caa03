import type { PluginEnvironmentSyncResult, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { FileTransport, ScriptRunner } from "../transport.js";
import { base64SyncIn, base64SyncOut, DEFAULT_BASE64_CHUNK_BYTES } from "./base64-sync.js";
import { SyncError } from "./errors.js";
import { downloadStagesCleanupScript, fileApiSyncIn, fileApiSyncOut, type FileApiSyncOptions } from "./file-api-sync.js";
import type { SyncOptions } from "./options.js";
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
   * Asked at the start of each operation where the runner could stream but the file API was
   * preferred: true when a stream costs no vendor call now (the lease's command channel is ready),
   * so this operation streams; false keeps the file API. A channel that breaks mid-operation costs
   * nothing extra here: each of its commands then runs as a vendor exec, once (or fails as a broken
   * exec does), and the runner streams either way.
   */
  streamsFree?: () => boolean;
}

/** Bytes of script around a base64 chunk (stage checks, the append command). */
const BASE64_SCRIPT_OVERHEAD = 8 * 1024;

/**
 * The sync strategy a transport can carry safely, made once per lease (it remembers what it left in
 * the sandbox; `runner` may be a function giving the lease's current runner):
 * - `stream`: tar over stdin/stdout, one or two calls per mapping — only over a binary-safe,
 *   streamed-stdin transport with EOF;
 * - `file-api`: the vendor's file API moves archives, one script confines and installs them — two
 *   calls per operation; an operation that finds `streamsFree()` streams instead;
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
    // Only where the runner streams anyway: a stream it cannot carry has no safe fallback.
    const streamNow = () => streams && options.streamsFree?.() === true;
    return {
      kind: "file-api",
      syncIn: (ops, opts) => (streamNow() ? syncIn(current(), ops, opts) : fileApiSyncIn(current(), files, ops, withScratch(opts))),
      syncOut: (ops, opts) => {
        if (streamNow()) return syncOut(current(), ops, opts);
        staged = true;
        return fileApiSyncOut(current(), files, ops, opts, stages);
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
