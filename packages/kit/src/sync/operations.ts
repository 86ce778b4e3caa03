import type { PluginEnvironmentSyncResult, PluginPostUploadCommand, PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { SyncError, asSyncError } from "./errors.js";
import type { TransferCounts } from "./host-pack.js";
import { checkMapping, checkOperation, hostPath } from "./mapping.js";
import { resolveSyncOptions, throwIfAborted, type ResolvedSyncOptions, type SyncOptions } from "./options.js";
import { runPostUploadCommands } from "./post-upload.js";
import { confineSandboxPath } from "./sandbox-path.js";

export type Direction = "in" | "out";
export interface TransferContext {
  /**
   * Set for the last mapping of a sync-in operation that has post-upload commands, when the
   * strategy folds them into its final script (`foldsPostUpload`). The transfer then runs them.
   */
  postUpload?: readonly PluginPostUploadCommand[];
}
export type MappingTransfer = (mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, context: TransferContext) => Promise<TransferCounts>;

export interface OperationLoopOptions {
  /** The strategy runs post-upload commands inside the last mapping's final script (one call fewer per command). */
  foldsPostUpload?: boolean;
}

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
): Promise<PluginEnvironmentSyncResult> {
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

  const results: PluginEnvironmentSyncResult["operations"] = [];
  for (const operation of operations) {
    const { operationId } = operation;
    try {
      throwIfAborted(o.signal);
      let files = 0;
      let bytes = 0;
      const commands = operation.postUploadCommands ?? [];
      const fold = direction === "in" && loop.foldsPostUpload === true && commands.length > 0 && operation.files.length > 0;
      for (const [index, mapping] of operation.files.entries()) {
        throwIfAborted(o.signal);
        const last = index === operation.files.length - 1;
        const counts = await transfer(mapping, o, fold && last ? { postUpload: commands } : {});
        files += counts.files;
        bytes += counts.bytes;
      }
      if (direction === "in") {
        if (!fold) await runPostUploadCommands(runner, commands, o);
      } else if (commands.length > 0) {
        // They run after an *upload*; a download has nothing in the sandbox for them to act on.
        o.log(`operation ${operationId}: postUploadCommands ignored on sync-out`);
      }
      results.push({ operationId, filesTransferred: files, bytesTransferred: bytes });
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
