import type { ScriptRunner } from "../transport.js";
import { removeStageScript } from "./download-scripts.js";
import type { ResolvedSyncOptions } from "./options.js";
import { runScript } from "./run-script.js";
import type { ConfinedSandboxPath } from "./sandbox-path.js";
import { removeStage } from "./upload-scripts.js";

/**
 * Best-effort removal of sandbox stages after a failure (or, for download stages, always). It runs
 * even when the sync was aborted, and never throws: the failure that brought us here is the one
 * to report.
 */
export async function removeUploadStageQuietly(runner: ScriptRunner, target: ConfinedSandboxPath, o: ResolvedSyncOptions, stage: string): Promise<void> {
  await quietly(runner, removeStage(target, o.roots, stage));
}

export async function removeDownloadStageQuietly(runner: ScriptRunner, stagePath: string): Promise<void> {
  await quietly(runner, removeStageScript(stagePath));
}

async function quietly(runner: ScriptRunner, script: string): Promise<void> {
  try {
    await runScript(runner, script, { maxStderrBytes: 4096, timeoutMs: 60_000 });
  } catch {
    // ignored on purpose
  }
}
