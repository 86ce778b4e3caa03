import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { definePlugin, type PluginContext, type PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import {
  createDuplexChannels,
  createLocalScriptRunner,
  endMarkedProcesses,
  executeCommand,
  execRequestFrom,
  leaseFingerprint,
  resolveLeaseExpiry,
  sentinelMatches,
  syncIn,
  syncOut,
  type ScriptRunner,
} from "@paperclip-sandbox/kit";
import { probeResult } from "@paperclip-sandbox/kit";
import { fakeConfig } from "./config.js";
import { LeaseActivity } from "./lease-activity.js";
import { FakeLeaseStore, type FakeLeasePaths, type FakeLeaseRecord } from "./lease-store.js";

export interface FakePluginDeps {
  /** Where lease directories live; default `<os tmpdir>/paperclip-fake-plugin-<uid>` (one per user: a 0700 dir of another user is unusable). */
  baseDir?: string;
  now?: () => Date;
}

/** A fixed PATH so results do not depend on the worker's environment. */
const STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/**
 * Every command of a lease carries this marker, so a later worker (after a crash or restart) can still
 * find and end the lease's processes, `setsid`/`nohup` children included.
 */
const LEASE_MARKER = "PAPERCLIP_FAKE_PLUGIN_LEASE";

const leaseIdOf = (paths: FakeLeasePaths) => basename(paths.leaseDir);

export function createFakePlugin(deps: FakePluginDeps = {}) {
  const store = new FakeLeaseStore(deps.baseDir ?? join(tmpdir(), `paperclip-fake-plugin-${process.getuid?.() ?? "user"}`));
  const now = deps.now ?? (() => new Date());
  const activities = new Map<string, LeaseActivity>();
  let ctx: PluginContext | undefined;

  const activityOf = (leaseId: string): LeaseActivity => {
    let activity = activities.get(leaseId);
    if (!activity) activities.set(leaseId, (activity = new LeaseActivity()));
    return activity;
  };

  const runnerFor = (paths: FakeLeasePaths, activity: LeaseActivity): ScriptRunner =>
    createLocalScriptRunner({
      cwd: paths.workspace,
      env: { PATH: STANDARD_PATH, HOME: paths.home, TMPDIR: paths.tmp, LANG: "C.UTF-8", [LEASE_MARKER]: leaseIdOf(paths) },
      onSpawn: (pgid) => activity.groups.add(pgid),
    });

  const isExpired = (record: FakeLeaseRecord) => record.expiresAt !== null && Date.parse(record.expiresAt) <= now().getTime();

  const leaseResult = (record: FakeLeaseRecord, paths: FakeLeasePaths): PluginEnvironmentLease => ({
    providerLeaseId: record.providerLeaseId,
    metadata: {
      remoteCwd: paths.workspace,
      leaseDir: paths.leaseDir,
      fingerprint: record.fingerprint,
      reusable: record.reusable,
      image: record.image,
    },
    expiresAt: record.expiresAt,
  });

  /** A live lease for a hook that needs one; a released, expired or foreign id is an error. */
  const requireLease = async (lease: PluginEnvironmentLease) => {
    const found = lease.providerLeaseId ? await store.load(lease.providerLeaseId) : undefined;
    if (!found) throw new Error(`fake-plugin lease ${String(lease.providerLeaseId)} does not exist (released or never acquired)`);
    if (isExpired(found.record)) throw new Error(`fake-plugin lease ${found.record.providerLeaseId} expired at ${found.record.expiresAt}`);
    return found;
  };

  /** Ends the lease's work, this worker's and any earlier worker's; returns once its processes are gone. */
  const endActivity = async (leaseId: string) => {
    await duplex.closeLease(leaseId);
    const activity = activities.get(leaseId);
    activities.delete(leaseId);
    await activity?.end();
    await endMarkedProcesses(LEASE_MARKER, leaseId);
  };

  // The host's duplex bridge channels, over the same local runner as executes.
  const duplex = createDuplexChannels({
    runnerFor: async (scope) => {
      const { record, paths } = await requireLease({ providerLeaseId: scope.providerLeaseId, metadata: {} });
      const activity = activityOf(record.providerLeaseId);
      return { runner: runnerFor(paths, activity), leaseSignal: activity.signal };
    },
    notify: () => ctx?.duplexChannel,
    log: (message) => ctx?.logger.warn(message),
  });

  return definePlugin({
    async setup(context) {
      ctx = context;
    },

    async onEnvironmentValidateConfig(params) {
      return fakeConfig.validate(params.config);
    },

    async onEnvironmentProbe(params) {
      const config = fakeConfig.parse(params.config);
      if (config.probeFailure) {
        return probeResult("fake-plugin sandbox", [
          { severity: "error", message: config.probeFailure, code: "FAKE_PROBE_FAILURE", brief: `probe failed (injected): ${config.probeFailure}` },
        ]);
      }
      return probeResult("fake-plugin sandbox", [
        {
          severity: "warning",
          message: "No isolation: commands run on the worker's host as its user.",
          code: "FAKE_NO_ISOLATION",
          brief: "NO isolation: commands run on the worker's host as its user",
        },
      ]);
    },

    async onEnvironmentAcquireLease(params) {
      const config = fakeConfig.parse(params.config);
      if (config.acquireDelayMs) await sleep(config.acquireDelayMs);
      if (config.acquireFailure) throw new Error(`fake-plugin acquire failed (injected): ${config.acquireFailure}`);
      const { expiresAt } = resolveLeaseExpiry({ requestedExpiresAt: params.requestedExpiresAt, now: now() });
      const record: FakeLeaseRecord = {
        version: 1,
        providerLeaseId: FakeLeaseStore.newLeaseId(),
        companyId: params.companyId,
        environmentId: params.environmentId,
        fingerprint: leaseFingerprint({
          companyId: params.companyId,
          environmentId: params.environmentId,
          agentId: params.agentId,
          executionWorkspaceId: params.executionWorkspaceId,
          adapterType: params.adapterType,
          resource: { image: config.image },
        }),
        reusable: config.reuseLease,
        image: config.image,
        createdAt: now().toISOString(),
        expiresAt: expiresAt?.toISOString() ?? null,
      };
      return leaseResult(record, await store.create(record));
    },

    async onEnvironmentResumeLease(params) {
      const found = await store.load(params.providerLeaseId);
      if (!found || isExpired(found.record)) return { providerLeaseId: null, metadata: { expired: true } };
      const { record, paths } = found;
      const expected = params.leaseMetadata?.fingerprint;
      const identityHolds =
        (expected === undefined || expected === record.fingerprint) &&
        (!record.reusable || sentinelMatches(await store.readSentinel(paths), record.fingerprint));
      if (!identityHolds) return { providerLeaseId: null, metadata: { expired: false, identityMismatch: true } };
      return leaseResult(record, paths);
    },

    async onEnvironmentReleaseLease(params) {
      if (!params.providerLeaseId) return;
      const found = await store.load(params.providerLeaseId);
      await endActivity(params.providerLeaseId);
      if (found?.record.reusable && !isExpired(found.record)) return { providerLeaseId: params.providerLeaseId, state: "stopped" };
      await store.remove(params.providerLeaseId);
      return { providerLeaseId: params.providerLeaseId, state: "destroyed" };
    },

    async onEnvironmentDestroyLease(params) {
      if (!params.providerLeaseId) return;
      await endActivity(params.providerLeaseId);
      await store.remove(params.providerLeaseId);
      return { providerLeaseId: params.providerLeaseId, state: "destroyed" };
    },

    async onEnvironmentRealizeWorkspace(params) {
      const { paths } = await requireLease(params.lease);
      return { cwd: paths.workspace };
    },

    async onEnvironmentExecute(params) {
      const config = fakeConfig.parse(params.config);
      const { record, paths } = await requireLease(params.lease);
      if (config.executeFailure) throw new Error(`fake-plugin execute failed (injected): ${config.executeFailure}`);
      const activity = activityOf(record.providerLeaseId);
      return activity.track(
        executeCommand(runnerFor(paths, activity), execRequestFrom(params, paths.workspace), {
          log: (stream, text) => ctx?.execution.log(stream, text),
          defaultTimeoutMs: config.timeoutMs,
          signal: activity.signal,
        }),
      );
    },

    async onEnvironmentSyncIn(params) {
      const { record, paths } = await requireLease(params.lease);
      const activity = activityOf(record.providerLeaseId);
      return activity.track(syncIn(runnerFor(paths, activity), params.operations, { roots: [paths.leaseDir], signal: activity.signal }));
    },

    async onEnvironmentSyncOut(params) {
      const { record, paths } = await requireLease(params.lease);
      const activity = activityOf(record.providerLeaseId);
      return activity.track(syncOut(runnerFor(paths, activity), params.operations, { roots: [paths.leaseDir], signal: activity.signal }));
    },

    onDuplexChannelOpen: (params) => duplex.open(params),
    onDuplexChannelWrite: (params) => duplex.write(params),
    onDuplexChannelStop: (params) => duplex.stop(params),
    onDuplexChannelClose: (params) => duplex.close(params),
  });
}

export default createFakePlugin();
