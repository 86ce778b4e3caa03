import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { pipeline } from "node:stream/promises";
import type { PluginEnvironmentSyncResult, PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import { shellQuote as quote } from "../exec/quote.js";
import type { FileTransport, ScriptRunner } from "../transport.js";
import type { ArchiveLanding } from "./archive-land.js";
import { BoundedTail } from "./bounded-tail.js";
import { packToStageScript, parseStageReport } from "./download-scripts.js";
import { SyncError } from "./errors.js";
import { packHostDirectoryToFile, type TransferCounts } from "./host-pack.js";
import { fileModeFor, statHostSource } from "./host-source.js";
import type { ResolvedSyncOptions, SyncOptions } from "./options.js";
import { runOperations, type TransferContext } from "./operations.js";
import { expectFoldedSuccess, foldedFor } from "./post-upload.js";
import { expectSuccess, runScript } from "./run-script.js";
import { confineSandboxPath, type ConfinedSandboxPath } from "./sandbox-path.js";
import { removeUploadStageQuietly } from "./stage-cleanup.js";
import { receiveMapping, type ArchiveFormat } from "./sync-out.js";
import { beginStage, extractTree, installFile, newStageName, replaceWithTree, reportedSize } from "./upload-scripts.js";

export interface FileApiSyncOptions extends SyncOptions {
  /**
   * Sandbox directory the vendor's file API uploads into before a script moves the bytes into
   * place (never the target's own directory: the vendor API resolves paths itself, so the kit's
   * symlink-safe confinement must happen in the script). Default `/tmp`.
   */
  uploadScratchDir?: string;
}

/** Prefix of the sandbox-side archive stages sync out leaves for the file API to download. */
export const DOWNLOAD_STAGE_PREFIX = ".paperclip-download.";
/** Download stages older than this are removed by the next sync-out (a crashed worker's leftovers). */
const STALE_STAGE_MINUTES = 10;

/**
 * Host → sandbox through a vendor file API: one upload of the file (or of the host-packed tree) into
 * a scratch file, then ONE script that moves it into a confined stage, checks its size, installs or
 * extracts it, and runs the operation's post-upload commands. Two vendor calls per operation.
 */
export function fileApiSyncIn(runner: ScriptRunner, files: FileTransport, operations: PluginSyncOperation[], opts: FileApiSyncOptions): Promise<PluginEnvironmentSyncResult> {
  const scratchDir = opts.uploadScratchDir ?? "/tmp";
  return runOperations(
    runner,
    operations,
    opts,
    "in",
    (mapping, o, context) => (mapping.kind === "file" ? fileIn(runner, files, mapping, o, context, scratchDir) : directoryIn(runner, files, mapping, o, context, scratchDir)),
    { foldsPostUpload: true },
  );
}

/**
 * Sandbox → host through a vendor file API: one script packs the source into a stage, then one
 * download streams it into the same inspecting, extracting sink as streaming sync. The stage
 * stays (named in `stages`) until the next sync-out with the same `stages` removes it, for free,
 * in its pack script; what is left at the lease's end goes with `downloadStagesCleanupScript`.
 */
export function fileApiSyncOut(
  runner: ScriptRunner,
  files: FileTransport,
  operations: PluginSyncOperation[],
  opts: SyncOptions,
  stages: Set<string> = new Set(),
): Promise<PluginEnvironmentSyncResult> {
  return runOperations(runner, operations, opts, "out", (mapping, o) => receiveMapping(mapping, o, (source, sink, format) => downloadArchive(runner, files, mapping, source, sink, format, o, stages)));
}

/** Removes every download stage this sandbox holds (e.g. before a kept lease is stopped). */
export function downloadStagesCleanupScript(): string {
  return `find "\${TMPDIR:-/tmp}" -maxdepth 1 -type d -name '${DOWNLOAD_STAGE_PREFIX}*' -exec rm -rf {} + 2>/dev/null; exit 0\n`;
}

async function fileIn(runner: ScriptRunner, files: FileTransport, mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, context: TransferContext, scratchDir: string): Promise<TransferCounts> {
  const { source, stat } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  const scratch = scratchPath(scratchDir);
  await upload(files, scratch, fs.createReadStream(source), stat.size, o, target);
  const folded = foldedFor(context, o);
  const stdout = new BoundedTail(64 * 1024);
  const stage = newStageName();
  return stageRemovedOnFailure(runner, target, o, stage, async () => {
    const outcome = await runScript(
      runner,
      takeUpload(scratch) +
        beginStage(target, o.roots, stage, "file", { removeOnExit: true }) +
        armScratchRemoval +
        adoptUpload(stat.size) +
        installFile(fileModeFor(mapping, stat), stat.size) +
        folded.script,
      { stdout: stdout.push, env: folded.env, timeoutMs: folded.timeoutMs, outerSignal: o.signal, maxStderrBytes: o.maxStderrBytes },
    );
    expectFoldedSuccess(outcome, folded, `upload to ${target.path}`);
    const landed = reportedSize(stdout.text());
    if (landed !== stat.size) {
      throw new SyncError("SYNC_REMOTE_FAILED", `upload to ${target.path}: sent ${stat.size} bytes, the sandbox reported ${landed ?? "nothing"}`);
    }
    return { files: 1, bytes: stat.size };
  });
}

/**
 * The install script's trap removes its stage, unless the script was SIGKILLed (a kill whose grace
 * ran out, a lost command channel's recovery): remove it from here too, as streaming sync does. Not
 * after an abort: the lease is going away, and its sandbox may no longer answer.
 */
async function stageRemovedOnFailure<T>(runner: ScriptRunner, target: ConfinedSandboxPath, o: ResolvedSyncOptions, stage: string, install: () => Promise<T>): Promise<T> {
  try {
    return await install();
  } catch (error) {
    if (!o.signal?.aborted) await removeUploadStageQuietly(runner, target, o, stage);
    throw error;
  }
}

async function directoryIn(runner: ScriptRunner, files: FileTransport, mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, context: TransferContext, scratchDir: string): Promise<TransferCounts> {
  const { source } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  // Packed to host scratch first: the upload needs the archive's size, and only a whole archive is sent.
  const hostScratch = await fsp.mkdtemp(path.join(o.hostScratchDir, "paperclip-sync-")); // 0700
  try {
    const archive = path.join(hostScratch, "archive.tar");
    const { archiveBytes: size, ...counts } = await packHostDirectoryToFile(source, archive, { exclude: mapping.exclude, followSymlinks: mapping.followSymlinks, sparse: o.sparseSyncIn });
    const scratch = scratchPath(scratchDir);
    await upload(files, scratch, fs.createReadStream(archive), size, o, target);
    const folded = foldedFor(context, o);
    const stage = newStageName();
    return await stageRemovedOnFailure(runner, target, o, stage, async () => {
      const outcome = await runScript(
        runner,
        takeUpload(scratch) +
          beginStage(target, o.roots, stage, "directory", { removeOnExit: true }) +
          armScratchRemoval +
          adoptUpload(size) +
          extractTree("payload") +
          replaceWithTree(mapping.mode) +
          folded.script,
        { env: folded.env, timeoutMs: folded.timeoutMs, outerSignal: o.signal, maxStderrBytes: o.maxStderrBytes },
      );
      expectFoldedSuccess(outcome, folded, `extraction into ${target.path}`);
      return counts;
    });
  } finally {
    await fsp.rm(hostScratch, { recursive: true, force: true });
  }
}

async function downloadArchive(
  runner: ScriptRunner,
  files: FileTransport,
  mapping: PluginSyncFileMapping,
  source: ConfinedSandboxPath,
  sink: ArchiveLanding,
  format: ArchiveFormat,
  o: ResolvedSyncOptions,
  pending: Set<string>,
): Promise<void> {
  const stageName = `${DOWNLOAD_STAGE_PREFIX}${randomBytes(8).toString("hex")}`;
  const earlier = [...pending];
  const report = new BoundedTail(64 * 1024);
  const packed = await runScript(
    runner,
    removeStages(earlier) + packToStageScript(source, o.roots, { kind: mapping.kind, followSymlinks: mapping.followSymlinks === true, exclude: mapping.exclude, sparse: format.sparse }, stageName),
    { stdout: report.push, outerSignal: o.signal, maxStderrBytes: o.maxStderrBytes },
  );
  for (const stage of earlier) pending.delete(stage);
  expectSuccess(packed, `archiving ${source.path}`);
  const stage = parseStageReport(report.text(), stageName);
  if (stage === undefined) throw new SyncError("SYNC_REMOTE_FAILED", `archiving ${source.path}: the sandbox did not report its stage`);
  pending.add(stage.stagePath);
  if (stage.size > o.maxOutboundBytes) {
    throw new SyncError("SYNC_TOO_LARGE", `the archive of ${source.path} is ${stage.size} bytes, over ${o.maxOutboundBytes}`);
  }
  const signal = o.signal ? AbortSignal.any([o.signal, sink.stopSignal]) : sink.stopSignal;
  try {
    const stream = await files.download(`${stage.stagePath}/archive.tar`, { signal, size: stage.size });
    await pipeline(stream, sink, { signal });
  } catch (error) {
    if (sink.stopSignal.aborted) return;
    if (o.signal?.aborted) throw new SyncError("SYNC_ABORTED", "sync aborted", { cause: error });
    throw new SyncError("SYNC_TRANSPORT_FAILED", `downloading the archive of ${source.path} failed`, { cause: error });
  }
  if (sink.bytes !== stage.size) {
    throw new SyncError("SYNC_REMOTE_FAILED", `downloading the archive of ${source.path}: got ${sink.bytes} of ${stage.size} bytes`);
  }
}

async function upload(files: FileTransport, scratch: string, stream: fs.ReadStream, size: number, o: ResolvedSyncOptions, target: ConfinedSandboxPath): Promise<void> {
  if (files.maxUploadBytes !== undefined && size > files.maxUploadBytes) {
    stream.destroy();
    throw new SyncError("SYNC_TOO_LARGE", `upload to ${target.path}: ${size} bytes exceed the file API's ${files.maxUploadBytes}-byte limit`);
  }
  try {
    await files.upload(scratch, stream, { mode: 0o600, size, ...(o.signal ? { signal: o.signal } : {}) });
  } catch (error) {
    if (o.signal?.aborted) throw new SyncError("SYNC_ABORTED", "sync aborted", { cause: error });
    throw new SyncError("SYNC_TRANSPORT_FAILED", `uploading to ${target.path} failed`, { cause: error });
  } finally {
    stream.destroy();
  }
}

function scratchPath(dir: string): string {
  return `${dir.replace(/\/+$/, "") || ""}/.paperclip-upload-scratch.${randomBytes(12).toString("hex")}`;
}

/** Remembered before anything else, so the trap removes the uploaded file on every exit. */
function takeUpload(scratch: string): string {
  return `pc_scratch=${quote(scratch)}\n`;
}

// beginStage armed a trap for the stage; widen it to the scratch upload (`rm -f` of a moved file is a no-op).
const armScratchRemoval = `trap 'rm -rf "$pc_stage"; rm -f "$pc_scratch"' EXIT
`;

/** The uploaded file must be a regular file of the expected size; it becomes the stage's payload. */
function adoptUpload(size: number): string {
  return `if [ ! -f "$pc_scratch" ] || [ -L "$pc_scratch" ]; then echo 'the uploaded file is missing' >&2; exit 1; fi
pc_up=$(wc -c < "$pc_scratch") || exit 1
[ "$pc_up" -eq ${size} ] || { echo "the file API stored $pc_up of ${size} bytes" >&2; exit 1; }
mv -f "$pc_scratch" "$pc_stage/payload" || exit 1
`;
}

function removeStages(stagePaths: string[]): string {
  const known = stagePaths.map((stage) => `rm -rf ${quote(stage)}`).join("\n");
  return `${known}${known ? "\n" : ""}find "\${TMPDIR:-/tmp}" -maxdepth 1 -type d -name '${DOWNLOAD_STAGE_PREFIX}*' -mmin +${STALE_STAGE_MINUTES} -exec rm -rf {} + 2>/dev/null
`;
}
