import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { PluginEnvironmentExecuteResult, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { describeError } from "../errors.js";
import type { LeaseTracker, TrackedLease } from "../lease-tracker.js";
import type { ProviderConfig } from "../config-loader.js";
import type { ProviderSession } from "../provider-session.js";
import type { SecretRedactor } from "@paperclip-sandbox/kit";
import { snapshotTree, totalBytes } from "../run/workspace-snapshot.js";
import type { Sample } from "./metrics.js";
import type { SyncThroughputSample } from "./report.js";
import type { MetricName } from "./targets.js";

export interface SuiteOptions {
  session: ProviderSession;
  tracker: LeaseTracker;
  redactor: SecretRedactor;
  samples: number;
  /** The probe command (argv); its output must be non-empty and, when `expectOutput` is set, contain it. */
  command: string[];
  expectOutput: string | undefined;
  coldConfig: ProviderConfig;
  warmConfig: ProviderConfig;
  supportsReusableLeases: boolean;
  syncSamples: number;
  syncPayloadBytes: number;
  aborted: () => boolean;
  progress: (text: string) => void;
}

export interface SuiteResult {
  samples: Record<MetricName, Sample[]>;
  sync: { payloadBytes: number; samples: SyncThroughputSample[] };
  notes: string[];
}

const now = () => performance.now();

/** Why a probe command's result cannot verify the metric, or undefined when it can. */
function unverifiableCommand(result: PluginEnvironmentExecuteResult, output: string, expect: string | undefined): string | undefined {
  if (result.timedOut) return "the probe command timed out";
  if (result.exitCode === 127) return "the probe command was not found (exit 127)";
  if (result.exitCode !== 0) return `the probe command failed (exit ${result.exitCode ?? result.signal ?? "?"})`;
  if (output.trim() === "") return "the probe command printed nothing";
  if (expect !== undefined && !output.includes(expect)) return "the probe command printed something unexpected";
  return undefined;
}

export async function runBenchSuite(options: SuiteOptions): Promise<SuiteResult> {
  const samples: Record<MetricName, Sample[]> = { warmAcquire: [], coldAcquire: [], coldFirstCommand: [], steadyCommand: [], cleanup: [] };
  const notes: string[] = [];
  await coldCycles(options, samples);
  await warmSamples(options, samples, notes);
  const sync = await syncThroughput(options, notes);
  return { samples, sync, notes };
}

function failure(options: SuiteOptions, i: number, error: unknown): Sample {
  return { i, ms: null, outcome: "failed", note: options.redactor.redact(describeError(error)) };
}

async function runProbeCommand(options: SuiteOptions, lease: PluginEnvironmentLease, cwd: string, start: number) {
  let firstOutputAt: number | undefined;
  let output = "";
  const result = await options.session.execute(
    lease,
    { command: options.command[0]!, args: options.command.slice(1), cwd },
    {
      onLog: (_stream, chunk) => {
        if (firstOutputAt === undefined && chunk.length > 0) firstOutputAt = now();
        output += chunk;
      },
    },
  );
  const end = now();
  if (output === "") output = result.stdout + result.stderr; // provider without live output
  return { result, output, firstOutputMs: (firstOutputAt ?? end) - start, totalMs: end - start };
}

/** Per cycle: cold acquire → realize → first command → one steady command → release (cleanup). */
async function coldCycles(options: SuiteOptions, samples: Record<MetricName, Sample[]>): Promise<void> {
  const { session, tracker } = options;
  for (let i = 1; i <= options.samples && !options.aborted(); i++) {
    options.progress(`cold cycle ${i}/${options.samples}`);
    session.config = options.coldConfig;
    const start = now();
    let tracked: TrackedLease;
    try {
      tracked = await tracker.acquire(session);
    } catch (error) {
      samples.coldAcquire.push(failure(options, i, error));
      samples.coldFirstCommand.push(failure(options, i, error));
      continue;
    }
    samples.coldAcquire.push({ i, ms: now() - start, outcome: "ok" });
    let released = false;
    try {
      const remoteCwd = typeof tracked.lease.metadata?.remoteCwd === "string" ? tracked.lease.metadata.remoteCwd : undefined;
      let cwd: string | undefined;
      try {
        const realized = await session.realizeWorkspace(tracked.lease, { remotePath: remoteCwd });
        cwd = realized.cwd || remoteCwd;
        const first = await runProbeCommand(options, tracked.lease, cwd!, start);
        const why = unverifiableCommand(first.result, first.output, options.expectOutput);
        samples.coldFirstCommand.push(why ? { i, ms: first.firstOutputMs, outcome: "unverifiable", note: why } : { i, ms: first.firstOutputMs, outcome: "ok" });
      } catch (error) {
        samples.coldFirstCommand.push(failure(options, i, error));
      }
      if (cwd !== undefined) {
        try {
          const steady = await runProbeCommand(options, tracked.lease, cwd, now());
          const why = unverifiableCommand(steady.result, steady.output, options.expectOutput);
          samples.steadyCommand.push(why ? { i, ms: steady.totalMs, outcome: "unverifiable", note: why } : { i, ms: steady.totalMs, outcome: "ok" });
        } catch (error) {
          samples.steadyCommand.push(failure(options, i, error));
        }
      }
      const releaseStart = now();
      try {
        released = true;
        const receipt = await tracker.release(session, tracked, { keep: false });
        const ms = now() - releaseStart;
        if (!receipt) samples.cleanup.push({ i, ms, outcome: "unverifiable", note: "release returned no termination receipt" });
        else if (receipt.providerLeaseId !== tracked.lease.providerLeaseId || !["stopped", "destroyed"].includes(receipt.state)) {
          samples.cleanup.push({ i, ms, outcome: "failed", note: "the termination receipt does not match the lease" });
        } else samples.cleanup.push({ i, ms, outcome: "ok" });
      } catch (error) {
        released = false;
        samples.cleanup.push(failure(options, i, error));
      }
    } finally {
      if (!released) await tracker.destroy(session, tracked).catch(() => undefined);
    }
  }
}

/**
 * Warm acquisition: resume of a reusable lease the provider kept on release. A provider without
 * reusable leases, or one that does not keep the lease, makes these samples unverifiable.
 */
async function warmSamples(options: SuiteOptions, samples: Record<MetricName, Sample[]>, notes: string[]): Promise<void> {
  const { session, tracker } = options;
  const out = samples.warmAcquire;
  if (!options.supportsReusableLeases) {
    for (let i = 1; i <= options.samples; i++) out.push({ i, ms: null, outcome: "unverifiable", note: "the provider does not declare reusable leases" });
    return;
  }
  if (options.warmConfig.reuseLease === false) notes.push("warm acquisition ran with reuseLease=false (as configured)");
  session.config = options.warmConfig;
  let warm: TrackedLease | undefined;
  let notKept = 0;
  const NOT_KEPT = "the provider did not keep the lease on release (resume says it expired)";
  try {
    for (let i = 1; i <= options.samples && !options.aborted(); i++) {
      options.progress(`warm resume ${i}/${options.samples}`);
      if (notKept >= 3) {
        out.push({ i, ms: null, outcome: "unverifiable", note: NOT_KEPT });
        continue;
      }
      if (!warm) {
        try {
          warm = await tracker.acquire(session);
          await tracker.release(session, warm); // kept for reuse when the provider supports it
        } catch (error) {
          out.push(failure(options, i, error));
          warm = undefined;
          continue;
        }
      }
      const start = now();
      let resumed: TrackedLease | undefined;
      try {
        resumed = await tracker.resume(session, warm);
      } catch (error) {
        out.push(failure(options, i, error));
        await tracker.destroy(session, warm).catch(() => undefined);
        warm = undefined;
        continue;
      }
      const ms = now() - start;
      if (!resumed) {
        out.push({ i, ms, outcome: "unverifiable", note: NOT_KEPT });
        warm = undefined;
        notKept++;
        continue;
      }
      notKept = 0;
      out.push({ i, ms, outcome: "ok" });
      warm = resumed;
      try {
        await tracker.release(session, warm);
      } catch {
        await tracker.destroy(session, warm).catch(() => undefined);
        warm = undefined;
      }
    }
  } finally {
    if (warm) {
      // The kept lease: resume then destroy, so nothing stays behind.
      await tracker.destroy(session, warm).catch(() => undefined);
    }
  }
}

async function writePayload(dir: string, totalBytesWanted: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  const big = Math.floor(totalBytesWanted / 2);
  await writeFile(path.join(dir, "large.bin"), randomBytes(big));
  const smallSize = 64 * 1024;
  const count = Math.max(1, Math.floor((totalBytesWanted - big) / smallSize));
  await mkdir(path.join(dir, "small"));
  for (let n = 0; n < count; n++) await writeFile(path.join(dir, "small", `f${n}.bin`), randomBytes(smallSize));
}

/** Round-trips a generated tree (half one large file, half 64 KiB files) through syncIn and syncOut. */
async function syncThroughput(options: SuiteOptions, notes: string[]): Promise<SuiteResult["sync"]> {
  const result: SuiteResult["sync"] = { payloadBytes: 0, samples: [] };
  if (options.syncSamples <= 0 || options.aborted()) return result;
  const { session, tracker } = options;
  session.config = options.coldConfig;
  const scratch = await mkdtemp(path.join(os.tmpdir(), "paperclip-sandbox-bench-"));
  let tracked: TrackedLease | undefined;
  try {
    const payload = path.join(scratch, "payload");
    await writePayload(payload, options.syncPayloadBytes);
    result.payloadBytes = totalBytes(await snapshotTree(payload));
    tracked = await tracker.acquire(session);
    const remoteCwd = typeof tracked.lease.metadata?.remoteCwd === "string" ? tracked.lease.metadata.remoteCwd : undefined;
    const cwd = (await session.realizeWorkspace(tracked.lease, { remotePath: remoteCwd })).cwd || remoteCwd!;
    const remote = path.posix.join(cwd, "paperclip-bench-sync");
    for (let i = 1; i <= options.syncSamples && !options.aborted(); i++) {
      options.progress(`sync ${i}/${options.syncSamples}`);
      let start = now();
      try {
        await session.syncIn(tracked.lease, [{ operationId: `bench-in-${i}`, files: [{ sourcePath: payload, targetPath: remote, kind: "directory" }] }]);
        result.samples.push({ i, direction: "in", bytes: result.payloadBytes, ms: now() - start, ok: true });
      } catch (error) {
        result.samples.push({ i, direction: "in", bytes: result.payloadBytes, ms: null, ok: false, note: options.redactor.redact(describeError(error)) });
        continue;
      }
      const target = path.join(scratch, `out-${i}`);
      start = now();
      try {
        await session.syncOut(tracked.lease, [{ operationId: `bench-out-${i}`, files: [{ sourcePath: remote, targetPath: target, kind: "directory" }] }]);
        const ms = now() - start;
        const bytes = totalBytes(await snapshotTree(target));
        const ok = bytes === result.payloadBytes;
        result.samples.push({ i, direction: "out", bytes, ms, ok, note: ok ? undefined : `round trip returned ${bytes} of ${result.payloadBytes} bytes` });
      } catch (error) {
        result.samples.push({ i, direction: "out", bytes: result.payloadBytes, ms: null, ok: false, note: options.redactor.redact(describeError(error)) });
      }
      await rm(target, { recursive: true, force: true });
    }
  } catch (error) {
    notes.push(`sync throughput not measured: ${options.redactor.redact(describeError(error))}`);
  } finally {
    if (tracked) await tracker.release(session, tracked, { keep: false }).catch(() => tracker.destroy(session, tracked!).catch(() => undefined));
    await rm(scratch, { recursive: true, force: true });
  }
  return result;
}
