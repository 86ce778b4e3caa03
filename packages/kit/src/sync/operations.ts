import type { PluginEnvironmentSyncResult, PluginPostUploadCommand, PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { SyncError, asSyncError } from "./errors.js";
import type { TransferCounts } from "./host-pack.js";
import { checkMapping, checkOperation, hostPath } from "./mapping.js";
import { resolveSyncOptions, throwIfAborted, type ResolvedSyncOptions, type SyncOptions } from "./options.js";
import { runPostUploadCommands } from "./post-upload.js";
import { confineSandboxPath } from "./sandbox-path.js";

export type Direction = "in" | "out";

/** One mapping's outcome: what moved and, on sync-out, the symlinks left out (sandbox paths). */
export interface MappingOutcome extends TransferCounts {
  skippedLinks?: { path: string; reason: string }[];
}

export interface TransferContext {
  /**
   * Set for the last mapping of a sync-in operation that has post-upload commands, when the
   * strategy folds them into its final script (`foldsPostUpload`). The transfer then runs them.
   */
  postUpload?: readonly PluginPostUploadCommand[];
}
export type MappingTransfer = (mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, context: TransferContext) => Promise<MappingOutcome>;

export interface OperationLoopOptions {
  /** The strategy runs post-upload commands inside the last mapping's final script (one call fewer per command). */
  foldsPostUpload?: boolean;
}

/**
 * One operation's accounting. The SDK's entry has only `operationId` and the two counts (no
 * metadata field), so sync-out adds `skippedLinks` (the sandbox paths of symlinks it did not
 * create on the host, sorted per mapping, at most `MAX_LISTED_SKIPPED_LINKS`) and
 * `skippedLinkCount` (all of them), only when it skipped any. Still a `PluginEnvironmentSyncResult`:
 * the host reads the counts and ignores the rest.
 */
export interface SyncOperationResult {
  operationId: string;
  filesTransferred: number;
  bytesTransferred: number;
  skippedLinks?: string[];
  skippedLinkCount?: number;
}

export interface SyncResult extends PluginEnvironmentSyncResult {
  operations: SyncOperationResult[];
}

/** Skipped links named in a result and in log lines, per operation; the count covers the rest. */
export const MAX_LISTED_SKIPPED_LINKS = 1000;

/**
 * The operation loop shared by every transfer strategy: validate everything up front (a malformed
 * fifth operation should not leave four applied), then run operations in array order, each mapping
 * in order, then (sync-in only) the post-upload commands; the first failure stops everything.
 */
export async function runOperations(
  runner: ScriptRunner,
  operations: PluginSyncOperation[],
  opts: SyncOptions,
  direction: Direction,
  transfer: MappingTransfer,
  loop: OperationLoopOptions = {},
): Promise<SyncResult> {
  const o = resolveSyncOptions(opts);
  if (!Array.isArray(operations)) throw new SyncError("SYNC_OPTIONS_INVALID", "operations must be an array");
  for (const operation of operations) {
    try {
      checkOperation(operation);
      for (const mapping of operation.files) checkPaths(mapping, direction, o);
    } catch (error) {
      throw asSyncError(error, String(operation?.operationId));
    }
  }

  const results: SyncOperationResult[] = [];
  for (const operation of operations) {
    const { operationId } = operation;
    try {
      throwIfAborted(o.signal);
      let files = 0;
      let bytes = 0;
      const commands = operation.postUploadCommands ?? [];
      const fold = direction === "in" && loop.foldsPostUpload === true && commands.length > 0 && operation.files.length > 0;
      const skipped: string[] = [];
      let skippedCount = 0;
      for (const [index, mapping] of operation.files.entries()) {
        throwIfAborted(o.signal);
        const last = index === operation.files.length - 1;
        const outcome = await transfer(mapping, o, fold && last ? { postUpload: commands } : {});
        files += outcome.files;
        bytes += outcome.bytes;
        for (const link of outcome.skippedLinks ?? []) {
          skippedCount += 1;
          if (skipped.length >= MAX_LISTED_SKIPPED_LINKS) continue;
          skipped.push(link.path);
          o.log(`operation ${operationId}: symlink ${JSON.stringify(link.path)} not created on the host (${link.reason})`);
        }
      }
      if (skippedCount > skipped.length) {
        o.log(`operation ${operationId}: ${skippedCount - skipped.length} more unsafe symlinks not created on the host (not listed)`);
      }
      if (direction === "in") {
        if (!fold) await runPostUploadCommands(runner, commands, o);
      } else if (commands.length > 0) {
        // They run after an *upload*; a download has nothing in the sandbox for them to act on.
        o.log(`operation ${operationId}: postUploadCommands ignored on sync-out`);
      }
      const result: SyncOperationResult = { operationId, filesTransferred: files, bytesTransferred: bytes };
      if (skippedCount > 0) Object.assign(result, { skippedLinks: skipped, skippedLinkCount: skippedCount });
      results.push(result);
      o.log(`operation ${operationId}: ${files} files, ${bytes} bytes ${direction === "in" ? "to the sandbox" : "to the host"}`);
    } catch (error) {
      throw asSyncError(error, operationId);
    }
  }
  return { operations: results };
}

function checkPaths(mapping: PluginSyncFileMapping, direction: Direction, o: ResolvedSyncOptions): void {
  checkMapping(mapping);
  if (direction === "in") {
    hostPath(mapping.sourcePath, "sourcePath");
    const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
    if (target.name === "") {
      throw new SyncError("SYNC_TARGET_INVALID", `targetPath ${target.path} is a sync root; it cannot be replaced`);
    }
  } else {
    const source = confineSandboxPath(mapping.sourcePath, o.roots, "sourcePath");
    if (mapping.kind === "file" && source.name === "") {
      throw new SyncError("SYNC_SOURCE_INVALID", `sourcePath ${source.path} is a sync root, not a file`);
    }
    hostPath(mapping.targetPath, "targetPath");
  }
}
