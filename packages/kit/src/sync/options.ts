import os from "node:os";
import { SyncError } from "./errors.js";
import { normalizeRoots } from "./sandbox-path.js";

export interface SyncOptions {
  /** Absolute sandbox directories; every sandbox path must resolve inside one of them. */
  roots: string[];
  /** Outbound (sandbox → host) archive bytes after which the transfer is aborted. Default 8 GiB. */
  maxOutboundBytes?: number;
  /** Sandbox stderr kept per script (the tail). Default 1 MiB. */
  maxStderrBytes?: number;
  /** Host directory for the archives sync-in packs before sending them. Default `os.tmpdir()`. */
  hostScratchDir?: string;
  /**
   * Sync-in of directory mappings packs host files with GNU tar's `--sparse` (when the host has
   * GNU tar), so holes stay holes on the way in. Only for sandboxes whose tar reads GNU sparse
   * members (GNU tar, bsdtar); busybox tar refuses them ("unknown typeflag: 0x53"). Default false.
   * (Sync-out needs no option: the sandbox script packs sparse only when its own tar is GNU tar.)
   */
  sparseSyncIn?: boolean;
  signal?: AbortSignal;
  log?: (msg: string) => void;
}

export const DEFAULT_MAX_OUTBOUND_BYTES = 8 * 1024 ** 3;
export const DEFAULT_MAX_STDERR_BYTES = 1024 ** 2;

/** `SyncOptions` with defaults applied and roots validated once, at the boundary. */
export interface ResolvedSyncOptions {
  roots: string[];
  maxOutboundBytes: number;
  maxStderrBytes: number;
  hostScratchDir: string;
  sparseSyncIn: boolean;
  signal: AbortSignal | undefined;
  log: (msg: string) => void;
}

export function resolveSyncOptions(opts: SyncOptions): ResolvedSyncOptions {
  return {
    roots: normalizeRoots(opts.roots),
    maxOutboundBytes: positiveOrDefault(opts.maxOutboundBytes, DEFAULT_MAX_OUTBOUND_BYTES, "maxOutboundBytes"),
    maxStderrBytes: positiveOrDefault(opts.maxStderrBytes, DEFAULT_MAX_STDERR_BYTES, "maxStderrBytes"),
    hostScratchDir: opts.hostScratchDir ?? os.tmpdir(),
    sparseSyncIn: opts.sparseSyncIn === true,
    signal: opts.signal,
    log: opts.log ?? (() => {}),
  };
}

function positiveOrDefault(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) {
    throw new SyncError("SYNC_OPTIONS_INVALID", `${name} must be a positive number`);
  }
  return Math.floor(value);
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new SyncError("SYNC_ABORTED", "sync aborted");
}
