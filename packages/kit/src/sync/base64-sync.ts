import fsp from "node:fs/promises";
import { once } from "node:events";
import path from "node:path";
import type { PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import type { ArchiveLanding } from "./archive-land.js";
import { BoundedTail } from "./bounded-tail.js";
import { packToStageScript, parseStageReport, readStageChunkScript, removeStageScript } from "./download-scripts.js";
import { SyncError } from "./errors.js";
import { packHostDirectoryToFile, type TransferCounts } from "./host-pack.js";
import { fileModeFor, statHostSource } from "./host-source.js";
import type { ResolvedSyncOptions, SyncOptions } from "./options.js";
import { runOperations, type SyncResult, type TransferContext } from "./operations.js";
import { expectFoldedSuccess, foldedFor, type FoldedPostUpload } from "./post-upload.js";
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
 * (base64 text on stdin). The first call also makes the 0700 stage next to the target and the last
 * also finishes (size check, mode and rename, or extract and replace) and runs the operation's
 * post-upload commands, so a payload of one chunk costs ONE call. Memory holds one chunk.
 */
export async function base64SyncIn(runner: ScriptRunner, operations: PluginSyncOperation[], opts: Base64SyncOptions): Promise<SyncResult> {
  const chunkBytes = chunkSizeOf(opts);
  return runOperations(
    runner,
    operations,
    opts,
    "in",
    (mapping, o, context) => (mapping.kind === "file" ? base64FileIn(runner, mapping, o, chunkBytes, context) : base64DirectoryIn(runner, mapping, o, chunkBytes, context)),
    { foldsPostUpload: true },
  );
}

/**
 * Sandbox → host for providers without a byte channel: the sandbox writes the tar archive to a
 * stage in its temp directory (and, when it fits in one chunk, prints it base64 at once and removes
 * the stage: one call); otherwise the host reads it back with one `dd | base64` call per chunk, the
 * last one removing the stage. It is then inspected and landed exactly like `syncOut`.
 */
export async function base64SyncOut(runner: ScriptRunner, operations: PluginSyncOperation[], opts: Base64SyncOptions): Promise<SyncResult> {
  const chunkBytes = chunkSizeOf(opts);
  return runOperations(runner, operations, opts, "out", (mapping, o) =>
    receiveMapping(mapping, o, (source, sink, format) => fetchArchiveInChunks(runner, mapping, source, sink, format, o, chunkBytes)),
  );
}

function chunkSizeOf(opts: Base64SyncOptions): number {
  const value = opts.chunkBytes ?? DEFAULT_BASE64_CHUNK_BYTES;
  if (!Number.isInteger(value) || value <= 0) throw new SyncError("SYNC_OPTIONS_INVALID", "chunkBytes must be a positive integer");
  return value;
}

async function base64FileIn(runner: ScriptRunner, mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, chunkBytes: number, context: TransferContext): Promise<TransferCounts> {
  const { source, stat } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  const folded = foldedFor(context, o);
  const sent = await uploadInChunks(runner, target, "file", source, stat.size, o, chunkBytes, {
    script: installFile(fileModeFor(mapping, stat), stat.size) + folded.script,
    folded,
    what: `upload to ${target.path}`,
    expectSize: stat.size,
  });
  return { files: 1, bytes: sent };
}

async function base64DirectoryIn(runner: ScriptRunner, mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, chunkBytes: number, context: TransferContext): Promise<TransferCounts> {
  const { source } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  // Pack to host scratch first: chunks must be re-readable and the archive complete before upload.
  const scratch = await fsp.mkdtemp(path.join(o.hostScratchDir, "paperclip-sync-"));
  try {
    const archive = path.join(scratch, "archive.tar");
    const { archiveBytes: size, ...counts } = await packHostDirectoryToFile(source, archive, { exclude: mapping.exclude, followSymlinks: mapping.followSymlinks, sparse: o.sparseSyncIn });
    const folded = foldedFor(context, o);
    await uploadInChunks(runner, target, "directory", archive, size, o, chunkBytes, {
      // The archive's size is checked before tar reads it: a stream cut at a member boundary must not land.
      script: payloadSizeCheck(size) + extractTree("payload") + replaceWithTree(mapping.mode) + folded.script,
      folded,
      what: `extraction into ${target.path}`,
    });
    return counts;
  } finally {
    await fsp.rm(scratch, { recursive: true, force: true });
  }
}

interface FinishStep {
  /** Runs after the last chunk, in the same script (the stage is `$pc_stage`). */
  script: string;
  folded: FoldedPostUpload;
  what: string;
  /** For a file: the size the sandbox must report after installing it. */
  expectSize?: number;
}

/**
 * Sends `file` in chunks of base64: the first call makes the stage, the last finishes. On a failure
 * before the finish, the stage is removed. Returns the bytes sent.
 */
async function uploadInChunks(
  runner: ScriptRunner,
  target: ConfinedSandboxPath,
  kind: "file" | "directory",
  file: string,
  size: number,
  o: ResolvedSyncOptions,
  chunkBytes: number,
  finish: FinishStep,
): Promise<number> {
  const stage = newStageName();
  const calls = Math.max(1, Math.ceil(size / chunkBytes));
  let sent = 0;
  let staged = false;
  let finished = false;
  const handle = await fsp.open(file, "r");
  try {
    const buffer = Buffer.alloc(Math.min(chunkBytes, Math.max(size, 1)));
    for (let index = 0; index < calls; index += 1) {
      const first = index === 0;
      const last = index === calls - 1;
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, sent);
      const prefix = first ? beginStage(target, o.roots, stage, kind, { removeOnExit: last }) + createEmptyPayload : reenterStage(target, o.roots, stage) + (last ? removeStageOnExit : "");
      const stdout = new BoundedTail(64 * 1024);
      const outcome = await runScript(runner, prefix + appendBase64ChunkFromStdin + (last ? finish.script : ""), {
        stdin: buffer.subarray(0, bytesRead).toString("base64"),
        stdout: stdout.push,
        outerSignal: o.signal,
        maxStderrBytes: o.maxStderrBytes,
        ...(last ? { env: finish.folded.env, timeoutMs: finish.folded.timeoutMs } : {}),
      });
      staged = true;
      if (last) {
        expectFoldedSuccess(outcome, finish.folded, finish.what);
        finished = true;
        sent += bytesRead;
        if (finish.expectSize !== undefined) {
          const landed = reportedSize(stdout.text());
          if (landed !== finish.expectSize) throw new SyncError("SYNC_REMOTE_FAILED", `${finish.what}: sent ${finish.expectSize} bytes, the sandbox reported ${landed ?? "nothing"}`);
        }
      } else {
        expectSuccess(outcome, `upload chunk at byte ${sent} to ${target.path}`);
        sent += bytesRead;
      }
    }
    return sent;
  } catch (error) {
    if (staged && !finished && !o.signal?.aborted) await removeUploadStageQuietly(runner, target, o, stage);
    throw error;
  } finally {
    await handle.close().catch(() => {});
  }
}

/** Refuses a payload whose size is not what was sent (checked before anything reads it). */
function payloadSizeCheck(size: number): string {
  return `pc_size=$(wc -c < "$pc_stage/payload") || exit 1
[ "$pc_size" -eq ${size} ] || { echo "received $pc_size of ${size} bytes" >&2; exit 1; }
`;
}

/** Marks the archive printed inline by the pack step when it fits in one chunk. */
const INLINE_MARKER = "PAPERCLIP_SYNC_INLINE";

async function fetchArchiveInChunks(
  runner: ScriptRunner,
  mapping: PluginSyncFileMapping,
  source: ConfinedSandboxPath,
  sink: ArchiveLanding,
  format: ArchiveFormat,
  o: ResolvedSyncOptions,
  chunkBytes: number,
): Promise<void> {
  const stageName = newStageName();
  const capture = cappedCapture(Math.ceil(chunkBytes / 3) * 4 * 1.1 + 64 * 1024);
  const packed = await runScript(
    runner,
    packToStageScript(source, o.roots, { kind: mapping.kind, followSymlinks: mapping.followSymlinks === true, exclude: mapping.exclude, sparse: format.sparse }, stageName) +
      // A small archive comes back right away and its stage goes: one call in all.
      `if [ "$pc_size" -le ${chunkBytes} ]; then printf '${INLINE_MARKER}\n'; base64 < "$pc_stage/archive.tar"; rm -rf "$pc_stage"; fi
`,
    { stdout: capture.sink, outerSignal: o.signal, limitSignal: capture.limit, maxStderrBytes: o.maxStderrBytes },
  );
  if (packed.abortCause === "limit") throw new SyncError("SYNC_REMOTE_FAILED", `archiving ${source.path}: more output than one chunk`);
  expectSuccess(packed, `archiving ${source.path}`);
  const text = capture.text();
  const stage = parseStageReport(text, stageName);
  if (stage === undefined) throw new SyncError("SYNC_REMOTE_FAILED", `archiving ${source.path}: the sandbox did not report its stage`);
  const inlineAt = text.indexOf(`${INLINE_MARKER}\n`);
  if (stage.size > o.maxOutboundBytes) {
    if (inlineAt < 0) await removeDownloadStageQuietly(runner, stage.stagePath);
    throw new SyncError("SYNC_TOO_LARGE", `the archive of ${source.path} is ${stage.size} bytes, over ${o.maxOutboundBytes}`);
  }
  if (inlineAt >= 0) {
    const decoded = Buffer.from(text.slice(inlineAt + INLINE_MARKER.length + 1), "base64");
    if (decoded.length !== stage.size) {
      throw new SyncError("SYNC_REMOTE_FAILED", `reading the archive of ${source.path}: got ${decoded.length} bytes, expected ${stage.size}`);
    }
    await writeInto(sink, decoded);
    return;
  }
  let removed = false;
  try {
    const chunks = Math.ceil(stage.size / chunkBytes);
    for (let index = 0, received = 0; received < stage.size && !sink.stopSignal.aborted; index++) {
      const expected = Math.min(chunkBytes, stage.size - received);
      const last = index === chunks - 1;
      const decoded = await readChunk(runner, stage.stagePath, chunkBytes, index, o, last);
      if (last) removed = true;
      if (decoded.length !== expected) {
        throw new SyncError("SYNC_REMOTE_FAILED", `reading the archive of ${source.path}: chunk ${index} has ${decoded.length} bytes, expected ${expected}`);
      }
      await writeInto(sink, decoded);
      received += decoded.length;
    }
  } finally {
    if (!removed) await removeDownloadStageQuietly(runner, stage.stagePath);
  }
}

/** Writes with backpressure (the sink never errors: it records failures and keeps accepting). */
async function writeInto(sink: ArchiveLanding, bytes: Buffer): Promise<void> {
  if (!sink.write(bytes)) await once(sink, "drain");
}

/** One chunk (the last one also removes the stage): stdout is capped a little above the base64 size of a chunk. */
async function readChunk(runner: ScriptRunner, stagePath: string, chunkBytes: number, index: number, o: ResolvedSyncOptions, last: boolean): Promise<Buffer> {
  const capture = cappedCapture(Math.ceil(chunkBytes / 3) * 4 * 1.1 + 1024);
  const outcome = await runScript(runner, readStageChunkScript(stagePath, chunkBytes, index) + (last ? removeStageScript(stagePath) : ""), {
    stdout: capture.sink,
    outerSignal: o.signal,
    limitSignal: capture.limit,
    maxStderrBytes: o.maxStderrBytes,
  });
  if (outcome.abortCause === "limit") throw new SyncError("SYNC_REMOTE_FAILED", `chunk ${index} of the staged archive is larger than expected`);
  expectSuccess(outcome, `reading chunk ${index} of the staged archive`);
  return Buffer.from(capture.text(), "base64");
}

/** Collects stdout up to `cap` bytes; past it, `limit` aborts the script (memory stays bounded). */
function cappedCapture(cap: number): { sink: (part: Buffer) => void; limit: AbortSignal; text: () => string } {
  const limit = new AbortController();
  const parts: Buffer[] = [];
  let held = 0;
  return {
    sink: (part) => {
      held += part.length;
      if (held > cap) limit.abort();
      else parts.push(part);
    },
    limit: limit.signal,
    text: () => Buffer.concat(parts).toString("latin1"),
  };
}
