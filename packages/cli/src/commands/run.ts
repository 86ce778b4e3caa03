import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { PluginEnvironmentExecuteResult, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { parseDuration, stringList } from "../cli-args.js";
import { CliFailure, EXIT_RUN_INFRA, UsageError, describeError } from "../errors.js";
import { err, out } from "../io.js";
import { LeaseDb } from "../lease-db.js";
import { LeaseTracker, type TrackedLease } from "../lease-tracker.js";
import { prepareProvider, startSession, startValidatedSession, type PreparedProvider } from "../provider-setup.js";
import type { ProviderSession } from "../provider-session.js";
import { applySyncOut } from "../run/apply-sync-out.js";
import { compileExcludes, createStreamRedactor } from "@paperclip-sandbox/kit";
import { Interrupted, Interrupts } from "../run/interrupts.js";
import { PhaseTimer } from "../run/phase-timer.js";
import { withSyncProgress } from "../run/sync-progress.js";
import { snapshotTree, totalBytes } from "../run/workspace-snapshot.js";

const NO_TIMEOUT_RPC_MS = 7 * 24 * 3600 * 1000;

export interface RunOptions {
  values: Record<string, unknown>;
  command: string[];
}

/** Exit code of the sandboxed command: its own code, 124 on timeout, 128+N when killed by signal N. */
function commandExitCode(result: PluginEnvironmentExecuteResult): number {
  if (result.timedOut) return 124;
  if (typeof result.exitCode === "number") return result.exitCode;
  const signo = result.signal ? (os.constants.signals as Record<string, number>)[result.signal] : undefined;
  return signo ? 128 + signo : 1;
}

function parseEnvFlags(values: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of values) {
    const eq = raw.indexOf("=");
    if (eq <= 0) throw new UsageError(`--env expects NAME=value, got '${raw}'`);
    env[raw.slice(0, eq)] = raw.slice(eq + 1);
  }
  return env;
}

async function resolveWorkspace(raw: unknown): Promise<string> {
  const dir = path.resolve(typeof raw === "string" ? raw : process.cwd());
  const stats = await stat(dir).catch(() => undefined);
  if (!stats?.isDirectory()) throw new UsageError(`workspace '${dir}' is not a directory`);
  return dir;
}

/** `run`: acquire → realize → sync in → execute (live output) → sync back → release. */
export async function runCommand({ values, command }: RunOptions): Promise<number> {
  if (command.length === 0) throw new UsageError("run: missing command (usage: paperclip-sandbox run [flags] -- CMD ARGS...)");
  const workspace = await resolveWorkspace(values.workspace);
  const timeoutMs = typeof values.timeout === "string" ? parseDuration("--timeout", values.timeout) : undefined;
  const env = parseEnvFlags(stringList(values.env));
  const excludes = stringList(values.exclude);
  const excludeMatcher = compileExcludes(excludes);
  const excluded = (relativePath: string) => excludeMatcher.excludes(relativePath);
  const wantReuse = values.reuse === true;

  const prepared = await prepareProvider(values);
  if (wantReuse) {
    if (!prepared.provider.supportsReusableLeases) {
      err(`paperclip-sandbox: ${prepared.provider.driverKey} does not support reusable leases; --reuse ignored\n`);
    } else if ("reuseLease" in (prepared.provider.configSchema.properties ?? {})) {
      prepared.config.reuseLease = true;
    }
  }
  const db = LeaseDb.open(typeof values.db === "string" ? values.db : undefined);
  const timer = new PhaseTimer();
  let session: ProviderSession | undefined;
  const interrupts = new Interrupts({
    notice: err,
    onForce: () => {
      session?.client.kill("SIGKILL");
      err("paperclip-sandbox: forced exit; the lease is left for `paperclip-sandbox leases gc`\n");
      process.exit(interrupts.exitCode());
    },
  });
  try {
    // Not raced against Ctrl-C: a worker that is starting must be ours to close.
    session = await timer.time("start worker", () => startValidatedSession(prepared));
    if (interrupts.signal.aborted) return interrupts.exitCode();
    const tracker = new LeaseTracker(db, prepared, "run");
    return await runInSession(session, tracker, prepared, interrupts, timer, {
      workspace,
      command,
      env,
      timeoutMs,
      excludes,
      excluded,
      reuse: wantReuse && prepared.provider.supportsReusableLeases,
      showTimings: values.timings === true,
    });
  } catch (error) {
    if (error instanceof Interrupted) return interrupts.exitCode();
    if (error instanceof UsageError || (error instanceof CliFailure && error.exitCode === EXIT_RUN_INFRA)) throw error;
    throw new CliFailure(prepared.redactor.redact(describeError(error)), EXIT_RUN_INFRA);
  } finally {
    interrupts.dispose();
    await session?.close();
    db.close();
  }
}

interface RunPlan {
  workspace: string;
  command: string[];
  env: Record<string, string>;
  timeoutMs: number | undefined;
  excludes: string[];
  excluded: (relative: string) => boolean;
  reuse: boolean;
  showTimings: boolean;
}

async function runInSession(session: ProviderSession, tracker: LeaseTracker, prepared: PreparedProvider, interrupts: Interrupts, timer: PhaseTimer, plan: RunPlan): Promise<number> {
  const redactor = prepared.redactor;
  let tracked: TrackedLease | undefined;
  let pendingAcquire: Promise<TrackedLease> | undefined;
  let exitCode: number | undefined;
  let failure: unknown;
  // Made only when the command has finished (just before sync out), so that a CLI killed while the
  // command runs leaves no staging directory behind.
  let staging: string | undefined;
  try {
    pendingAcquire = timer.time(plan.reuse ? "acquire (resume or new)" : "acquire", async () => {
      const resumed = plan.reuse ? await tracker.resumeIdle(session) : undefined;
      return resumed ?? (await tracker.acquire(session, { requestedCwd: undefined }));
    });
    const acquired = await interrupts.race(pendingAcquire);
    tracked = acquired;
    pendingAcquire = undefined;
    if (acquired.resumed) err(`paperclip-sandbox: resumed reusable lease ${acquired.lease.providerLeaseId}\n`);
    const lease: PluginEnvironmentLease = acquired.lease;
    const remoteCwd = typeof lease.metadata?.remoteCwd === "string" ? lease.metadata.remoteCwd : undefined;
    const realized = await interrupts.race(timer.time("realize workspace", () => session.realizeWorkspace(lease, { localPath: plan.workspace, remotePath: remoteCwd })));
    const remoteRoot = realized.cwd || remoteCwd;
    if (!remoteRoot) throw new CliFailure(`${session.driverKey} returned no workspace directory (realizeWorkspace cwd / metadata.remoteCwd)`, EXIT_RUN_INFRA);
    // A sync root itself cannot be replaced by a directory mapping: the workspace goes one level down.
    const cwd = remoteWorkspacePath(remoteRoot, plan.workspace);

    const before = await snapshotTree(plan.workspace, plan.excluded);
    const fileCount = [...before.values()].filter((e) => e.kind === "file").length;
    await interrupts.race(
      timer.time("sync in", () =>
        withSyncProgress(process.stderr, "sync in", { files: fileCount, bytes: totalBytes(before) }, async () => {
          const result = await session.syncIn(lease, [
            {
              operationId: "paperclip-sandbox-cli.workspace-in",
              files: [{ sourcePath: plan.workspace, targetPath: cwd, kind: "directory", exclude: plan.excludes, access: "rw" }],
            },
          ]);
          return sumSync(result.operations);
        }),
      ),
    );

    const stdoutRedactor = createStreamRedactor(redactor, out);
    const stderrRedactor = createStreamRedactor(redactor, err);
    let streamed = false;
    const configTimeout = typeof session.config.timeoutMs === "number" ? session.config.timeoutMs : undefined;
    const rpcTimeout = (plan.timeoutMs ?? configTimeout ?? NO_TIMEOUT_RPC_MS) + 30_000;
    const result = await interrupts.race(
      timer.time("execute", () =>
        session.execute(
          lease,
          { command: plan.command[0]!, args: plan.command.slice(1), cwd, env: plan.env, timeoutMs: plan.timeoutMs },
          {
            timeoutMs: rpcTimeout,
            onLog: (stream, chunk) => {
              streamed = true;
              (stream === "stderr" ? stderrRedactor : stdoutRedactor).push(chunk);
            },
          },
        ),
      ),
    );
    if (!streamed) {
      // A provider that does not stream still returns the output in the result.
      if (result.stdout) stdoutRedactor.push(result.stdout);
      if (result.stderr) stderrRedactor.push(result.stderr);
    }
    stdoutRedactor.flush();
    stderrRedactor.flush();
    exitCode = commandExitCode(result);
    if (result.timedOut) err(`paperclip-sandbox: command timed out after ${plan.timeoutMs ?? configTimeout} ms\n`);

    staging = await mkdtemp(path.join(os.tmpdir(), "paperclip-sandbox-sync-"));
    const stagedWorkspace = path.join(staging, "workspace");
    const notSynced = new Set<string>();
    await interrupts.race(
      timer.time("sync out", () =>
        withSyncProgress(process.stderr, "sync out", {}, async () => {
          const result = await session.syncOut(lease, [
            {
              operationId: "paperclip-sandbox-cli.workspace-out",
              files: [{ sourcePath: cwd, targetPath: stagedWorkspace, kind: "directory", exclude: plan.excludes }],
            },
          ]);
          // Links with an absolute or escaping target are not synced back: keep the local ones as they are.
          for (const operation of result.operations as Array<{ skippedLinks?: unknown }>) {
            for (const link of Array.isArray(operation.skippedLinks) ? operation.skippedLinks : []) {
              if (typeof link === "string" && link.startsWith(`${cwd}/`)) notSynced.add(link.slice(cwd.length + 1));
            }
          }
          return sumSync(result.operations);
        }),
      ),
    );
    const applied = await timer.time("apply changes", () => applySyncOut(before, stagedWorkspace, plan.workspace, plan.excluded, notSynced));
    for (const relative of notSynced) {
      err(`paperclip-sandbox: did not sync back the link ${relative} (its target is absolute or outside the workspace)\n`);
    }
    for (const relative of applied.conflicts) {
      err(`paperclip-sandbox: kept local ${relative} (changed both locally and in the sandbox)\n`);
    }
    for (const relative of applied.skipped) {
      err(`paperclip-sandbox: did not write ${relative} (a parent directory is not a real directory)\n`);
    }
  } catch (error) {
    failure = error;
  }

  // Release, whatever happened: an interrupt cancels active work.
  const interrupted = interrupts.signal.aborted;
  if (!tracked && pendingAcquire) {
    // Interrupted while acquiring: wait for the provider's answer, then release what it gave us.
    tracked = await pendingAcquire.catch(() => undefined);
  }
  if (tracked) {
    try {
      await timer.time("release", () => releaseLease(session, tracker, prepared, tracked!, interrupted));
    } catch (error) {
      err(`paperclip-sandbox: release failed: ${redactor.redact(describeError(error))}; run \`paperclip-sandbox leases gc\` to clean up\n`);
      if (failure === undefined && exitCode === undefined) failure = error;
    }
  }
  if (staging) await rm(staging, { recursive: true, force: true });
  if (plan.showTimings) err(timer.format());
  if (interrupted) return interrupts.exitCode();
  if (failure !== undefined) {
    if (failure instanceof CliFailure) throw failure;
    throw new CliFailure(redactor.redact(describeError(failure)), EXIT_RUN_INFRA);
  }
  return exitCode ?? EXIT_RUN_INFRA;
}

/** `<remote root>/<workspace basename>`, the basename reduced to a portable name. */
function remoteWorkspacePath(remoteRoot: string, workspace: string): string {
  const name =
    path
      .basename(workspace)
      .replace(/[^A-Za-z0-9._-]/g, "-")
      .replace(/^\.+$/, "") || "workspace";
  return path.posix.join(remoteRoot, name);
}

function sumSync(operations: { filesTransferred: number; bytesTransferred: number }[]): { files: number; bytes: number } {
  return operations.reduce((acc, op) => ({ files: acc.files + op.filesTransferred, bytes: acc.bytes + op.bytesTransferred }), { files: 0, bytes: 0 });
}

/**
 * Releases through the current worker; when that worker is gone (a terminal Ctrl-C reaches the
 * whole process group), starts a fresh one to release, and destroys as a last resort.
 */
async function releaseLease(session: ProviderSession, tracker: LeaseTracker, prepared: PreparedProvider, tracked: TrackedLease, cancel: boolean): Promise<void> {
  try {
    await tracker.release(session, tracked, { cancelActiveWork: cancel });
    return;
  } catch (error) {
    if (!cancel) throw error;
  }
  const fresh = await startSession(prepared, session.config);
  try {
    await tracker.release(fresh, tracked, { cancelActiveWork: true }).catch(() => tracker.destroy(fresh, tracked));
  } finally {
    await fresh.close();
  }
}
