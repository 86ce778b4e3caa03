import fs from "node:fs/promises";
import path from "node:path";
import type { PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import type { ScriptRunner } from "../transport.js";
import { createArchiveInspector, inspectArchive, type ArchivePlan } from "./archive-inspect.js";
import { landArchive, type LandHooks } from "./archive-land.js";
import { packToStdoutScript } from "./download-scripts.js";
import { SyncError } from "./errors.js";
import { compileExcludes, type ExcludeMatcher } from "./exclude-glob.js";
import { hostPath } from "./mapping.js";
import type { ResolvedSyncOptions, SyncOptions } from "./options.js";
import { runOperations, type MappingOutcome, type SyncResult } from "./operations.js";
import { expectSuccess, runScript } from "./run-script.js";
import { assertStreamingTransport } from "./streaming-transport.js";
import { confineSandboxPath, type ConfinedSandboxPath } from "./sandbox-path.js";
import { ArchiveSpool } from "./spool.js";
import { systemTar } from "./system-tar.js";

/**
 * Sandbox → host: the sandbox `tar -c`s the source to stdout, the host spools it to a private scratch
 * file (aborting past `maxOutboundBytes` of archive bytes), inspects every member, and only then
 * extracts it into a 0700 staging directory next to the target and renames it into place. Symlinks
 * with unsafe targets are left out and named in the result (`skippedLinks`); setuid/setgid bits
 * never land; sparse files keep their holes when both tars are GNU tar.
 */
export async function syncOut(runner: ScriptRunner, operations: PluginSyncOperation[], opts: SyncOptions): Promise<SyncResult> {
  assertStreamingTransport(runner);
  return runOperations(runner, operations, opts, "out", (mapping, o) =>
    receiveMapping(mapping, o, (source, archive, matcher, format) => streamArchive(runner, mapping, source, archive, matcher, format, o)),
  );
}

/** What the host accepts in an outbound archive beyond plain members. */
export interface ArchiveFormat {
  /** GNU tar sparse members (the host's GNU tar lands them with their holes). */
  sparse: boolean;
}

/**
 * Fills `archiveFile` (which does not exist yet) with the source's tar archive, in `format`. A
 * fetcher that inspected the bytes while writing them (with `matcher`, the mapping's excludes)
 * returns the plan; otherwise the file is inspected after.
 */
export type ArchiveFetcher = (
  source: ConfinedSandboxPath,
  archiveFile: string,
  matcher: ExcludeMatcher,
  format: ArchiveFormat,
) => Promise<ArchivePlan | void>;

/**
 * The host half of every sync-out strategy: fresh 0700 scratch directory, fetch, inspect, land;
 * the scratch directory is removed on every path. Skipped links are returned as sandbox paths.
 */
export async function receiveMapping(
  mapping: PluginSyncFileMapping,
  o: ResolvedSyncOptions,
  fetch: ArchiveFetcher,
  hooks?: LandHooks,
): Promise<MappingOutcome> {
  const source = confineSandboxPath(mapping.sourcePath, o.roots, "sourcePath");
  const target = hostPath(mapping.targetPath, "targetPath");
  const matcher = compileExcludes(mapping.kind === "directory" ? mapping.exclude : undefined);
  // Sparse members are asked for only when they can land as such (node-tar would fill the holes).
  const format: ArchiveFormat = { sparse: (await systemTar()) !== null };
  const scratch = await fs.mkdtemp(path.join(o.hostScratchDir, "paperclip-sync-")); // 0700
  try {
    const archive = path.join(scratch, "archive.tar");
    const plan =
      (await fetch(source, archive, matcher, format)) ?? (await inspectArchive(archive, mapping.kind, matcher, { gnuSparse: format.sparse }));
    await landArchive(archive, target, mapping.kind, plan, { mode: mapping.mode, matcher, hooks });
    const skippedLinks = plan.skippedLinks.map(({ path: member, reason }) => ({ path: path.posix.join(source.path, member), reason }));
    return { ...plan.counts, skippedLinks };
  } finally {
    await fs.rm(scratch, { recursive: true, force: true });
  }
}

async function streamArchive(
  runner: ScriptRunner,
  mapping: PluginSyncFileMapping,
  source: ConfinedSandboxPath,
  archiveFile: string,
  matcher: ExcludeMatcher,
  format: ArchiveFormat,
  o: ResolvedSyncOptions,
): Promise<ArchivePlan> {
  const limit = new AbortController();
  const inspector = createArchiveInspector(mapping.kind, matcher, { gnuSparse: format.sparse });
  const spool = new ArchiveSpool(archiveFile, o.maxOutboundBytes, () => limit.abort(), inspector);
  const script = packToStdoutScript(source, o.roots, {
    kind: mapping.kind,
    followSymlinks: mapping.followSymlinks === true,
    exclude: mapping.exclude,
    sparse: format.sparse,
  });
  let outcome;
  try {
    outcome = await runScript(runner, script, {
      stdout: spool,
      outerSignal: o.signal,
      limitSignal: limit.signal,
      maxStderrBytes: o.maxStderrBytes,
    });
    await spool.finish();
  } catch (error) {
    spool.abandon();
    throw error;
  }
  if (spool.overLimit || outcome.abortCause === "limit") {
    throw new SyncError("SYNC_TOO_LARGE", `the archive of ${source.path} exceeds ${o.maxOutboundBytes} bytes; transfer aborted`);
  }
  if (spool.fileError !== undefined) {
    throw new SyncError("SYNC_HOST_FAILED", "writing the outbound archive to host scratch failed", { cause: spool.fileError });
  }
  expectSuccess(outcome, `archiving ${source.path}`);
  return inspector.finish();
}
