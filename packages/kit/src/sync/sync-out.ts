import path from "node:path";
import type { PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { ArchiveLanding, type LandHooks } from "./archive-land.js";
import { packToStdoutScript } from "./download-scripts.js";
import { SyncError } from "./errors.js";
import { compileExcludes } from "./exclude-glob.js";
import { hostPath } from "./mapping.js";
import type { ResolvedSyncOptions, SyncOptions } from "./options.js";
import { runOperations, type MappingOutcome, type SyncResult } from "./operations.js";
import { expectSuccess, runScript } from "./run-script.js";
import { assertStreamingTransport } from "./streaming-transport.js";
import { confineSandboxPath, type ConfinedSandboxPath } from "./sandbox-path.js";
import { systemTar } from "./system-tar.js";

/**
 * Sandbox → host: the sandbox `tar -c`s the source to stdout; the host inspects every member as it
 * arrives and extracts only what it accepts into a 0700 staging directory next to the target
 * (aborting past `maxOutboundBytes` of archive bytes), checks the result and renames it into place. Symlinks
 * with unsafe targets are left out and named in the result (`skippedLinks`); setuid/setgid bits
 * never land; sparse files keep their holes when both tars are GNU tar.
 */
export async function syncOut(runner: ScriptRunner, operations: PluginSyncOperation[], opts: SyncOptions): Promise<SyncResult> {
  assertStreamingTransport(runner);
  return runOperations(runner, operations, opts, "out", (mapping, o) => receiveMapping(mapping, o, (source, sink, format) => streamArchive(runner, mapping, source, sink, format, o)));
}

/** What the host accepts in an outbound archive beyond plain members. */
export interface ArchiveFormat {
  /** GNU tar sparse members (the host's GNU tar lands them with their holes). */
  sparse: boolean;
}

/**
 * Writes the source's tar archive, in `format`, into `sink` (piping or writing with backpressure),
 * and stops early once `sink.stopSignal` fires (the sink decides what that failure is).
 */
export type ArchiveFetcher = (source: ConfinedSandboxPath, sink: ArchiveLanding, format: ArchiveFormat) => Promise<void>;

/**
 * The host half of every sync-out strategy: the fetched archive is inspected and extracted while
 * it arrives (`ArchiveLanding`), then checked and moved onto the target; its staging directory is
 * removed on every path. Skipped links are returned as sandbox paths.
 */
export async function receiveMapping(mapping: PluginSyncFileMapping, o: ResolvedSyncOptions, fetch: ArchiveFetcher, hooks?: LandHooks): Promise<MappingOutcome> {
  const source = confineSandboxPath(mapping.sourcePath, o.roots, "sourcePath");
  const target = hostPath(mapping.targetPath, "targetPath");
  const matcher = compileExcludes(mapping.kind === "directory" ? mapping.exclude : undefined);
  // Sparse members are asked for only when they can land as such (node-tar would fill the holes).
  const format: ArchiveFormat = { sparse: (await systemTar()) !== null };
  const landing = new ArchiveLanding(target, { kind: mapping.kind, matcher, gnuSparse: format.sparse, mode: mapping.mode, limitBytes: o.maxOutboundBytes, hooks });
  try {
    let fetchFailure: { error: unknown } | undefined;
    try {
      await fetch(source, landing, format);
    } catch (error) {
      fetchFailure = { error };
    }
    await landing.finished();
    // The sink's own reasons first: a fetch it stopped fails for them.
    if (landing.overLimit) throw new SyncError("SYNC_TOO_LARGE", `the archive of ${source.path} exceeds ${o.maxOutboundBytes} bytes; transfer aborted`);
    if (landing.hostError !== undefined) throw landing.hostError;
    if (fetchFailure !== undefined) throw fetchFailure.error;
    const plan = await landing.land();
    const skippedLinks = plan.skippedLinks.map(({ path: member, reason }) => ({ path: path.posix.join(source.path, member), reason }));
    return { ...plan.counts, skippedLinks };
  } finally {
    await landing.dispose();
  }
}

async function streamArchive(runner: ScriptRunner, mapping: PluginSyncFileMapping, source: ConfinedSandboxPath, sink: ArchiveLanding, format: ArchiveFormat, o: ResolvedSyncOptions): Promise<void> {
  const script = packToStdoutScript(source, o.roots, {
    kind: mapping.kind,
    followSymlinks: mapping.followSymlinks === true,
    exclude: mapping.exclude,
    sparse: format.sparse,
  });
  const outcome = await runScript(runner, script, {
    stdout: sink,
    outerSignal: o.signal,
    limitSignal: sink.stopSignal,
    maxStderrBytes: o.maxStderrBytes,
  });
  if (outcome.abortCause === "limit") return;
  expectSuccess(outcome, `archiving ${source.path}`);
}
