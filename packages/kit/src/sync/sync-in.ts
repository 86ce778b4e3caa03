import fs from "node:fs";
import { Transform, pipeline } from "node:stream";
import type { PluginEnvironmentSyncResult, PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { BoundedTail } from "./bounded-tail.js";
import { SyncError } from "./errors.js";
import { packHostDirectory, type TransferCounts } from "./host-pack.js";
import { fileModeFor, statHostSource } from "./host-source.js";
import type { ResolvedSyncOptions, SyncOptions } from "./options.js";
import { runOperations, type TransferContext } from "./operations.js";
import { expectFoldedSuccess, foldedFor } from "./post-upload.js";
import { expectSuccess, runScript } from "./run-script.js";
import { assertStreamingTransport } from "./streaming-transport.js";
import { confineSandboxPath } from "./sandbox-path.js";
import { removeUploadStageQuietly } from "./stage-cleanup.js";
import { beginStage, extractTree, installFile, keepStage, newStageName, receivePayloadFromStdin, reenterStage, removeStageOnExit, replaceWithTree, reportedSize } from "./upload-scripts.js";

/**
 * Host → sandbox over the runner's stdin byte channel: a file streams as-is into a stage next to
 * its target and is renamed into place; a directory streams as a tar archive (packed on the host)
 * that the sandbox's `tar -x` unpacks into a stage before it replaces the target.
 */
export async function syncIn(runner: ScriptRunner, operations: PluginSyncOperation[], opts: SyncOptions): Promise<PluginEnvironmentSyncResult> {
  assertStreamingTransport(runner);
  return runOperations(
    runner,
    operations,
    opts,
    "in",
    (mapping, o, context) => (mapping.kind === "file" ? streamFileIn(runner, mapping, o, context) : streamDirectoryIn(runner, mapping, o, context)),
    { foldsPostUpload: true },
  );
}

async function streamFileIn(runner: ScriptRunner, mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, context: TransferContext): Promise<TransferCounts> {
  const { source, stat } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  const stage = newStageName();
  // The operation's post-upload commands run at the end of the same script (one call in all).
  const folded = foldedFor(context, o);
  const script = beginStage(target, o.roots, stage, "file", { removeOnExit: true }) + receivePayloadFromStdin + installFile(fileModeFor(mapping, stat), stat.size) + folded.script;

  let sent = 0;
  let readError: Error | undefined;
  const input = fs.createReadStream(source, { highWaterMark: 256 * 1024 });
  const counter = new Transform({
    highWaterMark: 256 * 1024,
    transform(chunk: Buffer, _encoding, callback) {
      sent += chunk.length;
      callback(null, chunk);
    },
  });
  pipeline(input, counter, (error) => {
    if (error) readError ??= error;
  });
  const stdout = new BoundedTail(64 * 1024);
  let installed = false;
  try {
    const outcome = await runScript(runner, script, {
      stdin: counter,
      stdout: stdout.push,
      env: folded.env,
      timeoutMs: folded.timeoutMs,
      outerSignal: o.signal,
      maxStderrBytes: o.maxStderrBytes,
    });
    if (readError !== undefined) {
      throw new SyncError("SYNC_HOST_FAILED", `reading ${source} failed`, { cause: readError });
    }
    expectFoldedSuccess(outcome, folded, `upload to ${target.path}`);
    const landed = reportedSize(stdout.text());
    if (landed !== sent) {
      throw new SyncError("SYNC_REMOTE_FAILED", `upload to ${target.path}: sent ${sent} bytes, the sandbox reported ${landed ?? "nothing"}`);
    }
    installed = true;
    return { files: 1, bytes: sent };
  } finally {
    input.destroy();
    counter.destroy();
    // The script's trap removes its stage, unless the script was SIGKILLed (a kill whose grace ran
    // out). Not after an abort: the lease is going away, and its sandbox may no longer answer.
    if (!installed && !o.signal?.aborted) await removeUploadStageQuietly(runner, target, o, stage);
  }
}

async function streamDirectoryIn(runner: ScriptRunner, mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, context: TransferContext): Promise<TransferCounts> {
  const { source } = await statHostSource(mapping);
  const target = confineSandboxPath(mapping.targetPath, o.roots, "targetPath");
  const stage = newStageName();
  // A packing failure (unreadable file, dangling link...) ends the sandbox side at once: its stdin
  // might otherwise never reach EOF, and a truncated archive must not be committed.
  const packFailed = new AbortController();
  const pack = await packHostDirectory(source, {
    exclude: mapping.exclude,
    followSymlinks: mapping.followSymlinks,
    sparse: o.sparseSyncIn,
    onError: () => packFailed.abort(),
  });
  let committed = false;
  let packDone = false;
  try {
    // 1. Extract into the stage. The stage survives only if the script succeeds.
    const extracted = await runScript(runner, beginStage(target, o.roots, stage, "directory", { removeOnExit: true }) + extractTree("stdin") + keepStage, {
      stdin: pack.stream,
      outerSignal: o.signal,
      limitSignal: packFailed.signal,
      maxStderrBytes: o.maxStderrBytes,
    });
    const staged = extracted.exit.exitCode === 0 && extracted.abortCause === undefined;
    if (!staged) pack.stop();
    const packError = await pack.finished();
    packDone = true;
    if (packError !== undefined) {
      throw new SyncError("SYNC_SOURCE_INVALID", `packing ${source} failed (${errnoOf(packError)})`, { cause: packError });
    }
    expectSuccess(extracted, `extraction into ${target.path}`);
    // 2. The whole archive was sent and unpacked: replace the target (and run the post-upload commands).
    const folded = foldedFor(context, o);
    const replaced = await runScript(runner, reenterStage(target, o.roots, stage) + removeStageOnExit + replaceWithTree(mapping.mode) + folded.script, {
      env: folded.env,
      timeoutMs: folded.timeoutMs,
      outerSignal: o.signal,
      maxStderrBytes: o.maxStderrBytes,
    });
    expectFoldedSuccess(replaced, folded, `replacing ${target.path}`);
    committed = true;
    return { ...pack.counts };
  } finally {
    if (!packDone) pack.stop();
    pack.stream.destroy();
    // Each script's trap removes the stage it leaves on failure, unless the script was SIGKILLed
    // (a kill whose grace ran out, e.g. under load): remove it from here too. Not after an abort:
    // the lease is going away, and its sandbox may no longer answer.
    if (!committed && !o.signal?.aborted) await removeUploadStageQuietly(runner, target, o, stage);
  }
}

function errnoOf(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  return typeof code === "string" ? code : error.name;
}
