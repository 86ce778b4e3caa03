import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { BoundedTail } from "./bounded-tail.js";
import {
  packToStageScript,
  parseStageReport,
  readStageChunkScript,
} from "./download-scripts.js";
import { SyncError } from "./errors.js";
import { packHostDirectory, type TransferCounts } from "./host-pack.js";
import { fileModeFor, statHostSource } from "./host-source.js";
import type { ResolvedSyncOptions, SyncOptions } from "./options.js";
import { runOperations, type SyncResult } from "./operations.js";
import { expectSuccess, runScript } from "./run-script.js";
import { confineSandboxPath, type ConfinedSandboxPath } from "./sandbox-path.js";
import { removeDownloadStageQuietly, removeUploadStageQuietly } from "./stage-cleanup.js";
import { receiveMapping, type ArchiveFormat } from "./sync-out.js";
import {
  appendBase64ChunkFromStdin,
  beginStage,
  createEmptyPayload,
  extractTree,
  installFile,
  newStageName,
  reenterStage,
  removeStageOnExit,
  replaceWithTree,
  reportedSize,
} from "./upload-scripts.js";

/** Decoded bytes per runner call: about 4 MiB of base64 on stdin or stdout. */
export const DEFAULT_BASE64_CHUNK_BYTES = 3 * 1024 * 1024;

export interface Base64SyncOptions extends SyncOptions {
  /** Decoded bytes per runner call. Default 3 MiB. */
  chunkBytes?: number;
}

/**
 * Host → sandbox for providers without a byte channel: every runner call carries at most one chunk
 * (base64 text on stdin), appended to a 0700 stage next to the target; a last call checks the size,
 * sets the mode and renames (file) or extracts and replaces (directory). Memory holds one chunk.
 */
export async function base64SyncIn(
  runner: ScriptRunner,
  operations: PluginSyncOperation[],
  opts: Base64SyncOptions,
): Promise<SyncResult> {
  const chunkBytes = chunkSizeOf(opts);
  return runOperations(runner, operations, opts, "in", (mapping, o) =>
    mapping.kind === "file" ? base64FileIn(runner, mapping, o, chunkBytes) : base64DirectoryIn(runner, mapping, o, chunkBytes),
  );
}

/**
 * Sandbox → host for providers without a byte channel: the sandbox writes the tar archive to a
 * stage in its temp directory, the host reads it back with one `dd | base64` call per chunk, then
 * inspects and lands it exactly like `syncOut`.
 */
export async function base64SyncOut(
  runner: ScriptRunner,
  operations: PluginSyncOperation[],
  opts: Base64SyncOptions,
): Promise<SyncResult> {
  const chunkBytes = chunkSizeOf(opts);
  return runOperations(runner, operations, opts, "out", (mapping, o) =>
    receiveMapping(mapping, o, (source, archive, _matcher, format) => fetchArchiveInChunks(runner, mapping, source, archive, format, o, chunkBytes)),
  );
}

function chunkSizeOf(opts: Base64SyncOptions): number {
  const value = opts.chunkBytes ?? DEFAULT_BASE64_CHUNK_BYTES;
  if (!Number.isInteger(value) || value <= 0) throw new SyncError("SYNC_OPTIONS_INVALID", "chunkBytes must be a positive integer");
  return value;
}

async function base64FileIn(
  runner: ScriptRunner,
  mapping: PluginSyncFileMapping,
  o: ResolvedSyncOptions,
  chunkBytes: number,
): Promise<TransferCounts> {
  const { source, stat } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  const stage = newStageName();
  const sent = await uploadInChunks(runner, target, stage, "file", source, o, chunkBytes, async () => {
    const stdout = new BoundedTail(64 * 1024);
    const finish = await runScript(runner, reenterStage(target, o.roots, stage) + removeStageOnExit + installFile(fileModeFor(mapping, stat), stat.size), {
      stdout: stdout.push,
      outerSignal: o.signal,
      maxStderrBytes: o.maxStderrBytes,
    });
    expectSuccess(finish, `upload to ${target.path}`);
    return reportedSize(stdout.text());
  });
  return { files: 1, bytes: sent };
}

async function base64DirectoryIn(
  runner: ScriptRunner,
  mapping: PluginSyncFileMapping,
  o: ResolvedSyncOptions,
  chunkBytes: number,
): Promise<TransferCounts> {
  const { source } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  // Pack to host scratch first: chunks must be re-readable and the archive complete before upload.
  const scratch = await fsp.mkdtemp(path.join(o.hostScratchDir, "paperclip-sync-"));
  try {
    const archive = path.join(scratch, "archive.tar");
    const pack = await packHostDirectory(source, { exclude: mapping.exclude, followSymlinks: mapping.followSymlinks, sparse: o.sparseSyncIn });
    let packError: Error | undefined;
    try {
      await pipeline(pack.stream, fs.createWriteStream(archive, { flags: "wx", mode: 0o600 }));
      packError = await pack.finished();
    } catch (error) {
      pack.stop();
      packError = pack.error() ?? (error instanceof Error ? error : new Error(String(error)));
    }
    if (packError !== undefined) {
      throw new SyncError("SYNC_SOURCE_INVALID", `packing ${source} failed`, { cause: packError });
    }
    const stage = newStageName();
    await uploadInChunks(runner, target, stage, "directory", archive, o, chunkBytes, async () => {
      const finish = await runScript(runner, reenterStage(target, o.roots, stage) + removeStageOnExit + extractTree("payload") + replaceWithTree(mapping.mode), {
        outerSignal: o.signal,
        maxStderrBytes: o.maxStderrBytes,
      });
      expectSuccess(finish, `extraction into ${target.path}`);
      return undefined;
    });
    return { ...pack.counts };
  } finally {
    await fsp.rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Create the stage, append `file` to `stage/payload` one base64 chunk per call, then run `finish`
 * (which removes the stage itself). On any failure before `finish`, the stage is removed.
 * Returns the bytes sent; when `finish` reports a size, it must match.
 */
async function uploadInChunks(
  runner: ScriptRunner,
  target: ConfinedSandboxPath,
  stage: string,
  kind: "file" | "directory",
  file: string,
  o: ResolvedSyncOptions,
  chunkBytes: number,
  finish: () => Promise<number | undefined>,
): Promise<number> {
  const begin = await runScript(runner, beginStage(target, o.roots, stage, kind) + createEmptyPayload, {
    outerSignal: o.signal,
    maxStderrBytes: o.maxStderrBytes,
  });
  expectSuccess(begin, `upload to ${target.path}`);
  let sent = 0;
  let finishing = false;
  const handle = await fsp.open(file, "r");
  try {
    const buffer = Buffer.alloc(chunkBytes);
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, chunkBytes, sent);
      if (bytesRead === 0) break;
      const chunk = await runScript(runner, reenterStage(target, o.roots, stage) + appendBase64ChunkFromStdin, {
        stdin: buffer.subarray(0, bytesRead).toString("base64"),
        outerSignal: o.signal,
        maxStderrBytes: o.maxStderrBytes,
      });
      expectSuccess(chunk, `upload chunk at byte ${sent} to ${target.path}`);
      sent += bytesRead;
    }
    await handle.close();
    finishing = true;
    const landed = await finish();
    if (landed !== undefined && landed !== sent) {
      throw new SyncError("SYNC_REMOTE_FAILED", `upload to ${target.path}: sent ${sent} bytes, the sandbox reported ${landed}`);
    }
    return sent;
  } catch (error) {
    if (!finishing) await removeUploadStageQuietly(runner, target, o, stage);
    throw error;
  } finally {
    await handle.close().catch(() => {});
  }
}

async function fetchArchiveInChunks(
  runner: ScriptRunner,
  mapping: PluginSyncFileMapping,
  source: ConfinedSandboxPath,
  archiveFile: string,
  format: ArchiveFormat,
  o: ResolvedSyncOptions,
  chunkBytes: number,
): Promise<void> {
  const stageName = newStageName();
  const report = new BoundedTail(64 * 1024);
  const packed = await runScript(
    runner,
    packToStageScript(
      source,
      o.roots,
      { kind: mapping.kind, followSymlinks: mapping.followSymlinks === true, exclude: mapping.exclude, sparse: format.sparse },
      stageName,
    ),
    { stdout: report.push, outerSignal: o.signal, maxStderrBytes: o.maxStderrBytes },
  );
  expectSuccess(packed, `archiving ${source.path}`);
  const stage = parseStageReport(report.text(), stageName);
  if (stage === undefined) throw new SyncError("SYNC_REMOTE_FAILED", `archiving ${source.path}: the sandbox did not report its stage`);
  try {
    if (stage.size > o.maxOutboundBytes) {
      throw new SyncError("SYNC_TOO_LARGE", `the archive of ${source.path} is ${stage.size} bytes, over ${o.maxOutboundBytes}`);
    }
    const out = await fsp.open(archiveFile, "wx", 0o600);
    try {
      for (let index = 0, received = 0; received < stage.size; index++) {
        const expected = Math.min(chunkBytes, stage.size - received);
        const decoded = await readChunk(runner, stage.stagePath, chunkBytes, index, o);
        if (decoded.length !== expected) {
          throw new SyncError("SYNC_REMOTE_FAILED", `reading the archive of ${source.path}: chunk ${index} has ${decoded.length} bytes, expected ${expected}`);
        }
        await out.write(decoded);
        received += decoded.length;
      }
    } finally {
      await out.close();
    }
  } finally {
    await removeDownloadStageQuietly(runner, stage.stagePath);
  }
}

/** One chunk: stdout is capped a little above the base64 size of a chunk, so memory stays bounded. */
async function readChunk(runner: ScriptRunner, stagePath: string, chunkBytes: number, index: number, o: ResolvedSyncOptions): Promise<Buffer> {
  const cap = Math.ceil(chunkBytes / 3) * 4 * 1.1 + 1024;
  const limit = new AbortController();
  const parts: Buffer[] = [];
  let held = 0;
  const outcome = await runScript(runner, readStageChunkScript(stagePath, chunkBytes, index), {
    stdout: (part: Buffer) => {
      held += part.length;
      if (held > cap) limit.abort();
      else parts.push(part);
    },
    outerSignal: o.signal,
    limitSignal: limit.signal,
    maxStderrBytes: o.maxStderrBytes,
  });
  if (outcome.abortCause === "limit") throw new SyncError("SYNC_REMOTE_FAILED", `chunk ${index} of the staged archive is larger than expected`);
  expectSuccess(outcome, `reading chunk ${index} of the staged archive`);
  return Buffer.from(Buffer.concat(parts).toString("latin1"), "base64");
}
