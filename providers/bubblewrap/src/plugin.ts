import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import {
  definePlugin,
  type PluginContext,
  type PluginEnvironmentLease,
  type PluginEnvironmentReleaseLeaseParams,
  type PluginEnvironmentTerminationReceipt,
} from "@paperclipai/plugin-sdk";
import {
  CreationCleanupError,
  createDuplexChannels,
  REUSE_SENTINEL_PATH,
  appendBlockedNetworkNote,
  buildSentinel,
  executeCommand,
  execRequestFrom,
  leaseFingerprint,
  leaseLabels,
  mergeEgressGrants,
  normalizeEgressGrant,
  resolveLeaseExpiry,
  sentinelMatches,
  syncIn,
  syncOut,
  type EgressGrant,
} from "@paperclip-sandbox/kit";
import { DEFAULT_LEASE_TTL_MS, providerConfig, sandboxShape, type BubblewrapConfig } from "./config.js";
import {
  checkSocketPathLength,
  createLeaseDirs,
  createResolver,
  defaultStateDir,
  defaultSupervisorScript,
  ensureStateDir,
  generatedEtcFiles,
  isLeaseId,
  leasePaths,
  LeaseGoneError,
  LeaseRuntime,
  newLeaseId,
  parseResolveOverrides,
  removeTree,
  RESOLVE_ENV,
  SANDBOX_PATHS,
  writeLeaseRecord,
  type LeaseRecord,
  type LiveLease,
} from "@paperclip-sandbox/sandbox-backend";
import { findBwrap, probeBubblewrap } from "./probe.js";
import { BUBBLEWRAP_DRIVER_KEY } from "./manifest.js";

export interface BubblewrapPluginDeps {
  /** The worker's environment (for PAPERCLIP_BUBBLEWRAP_RESOLVE and XDG_STATE_HOME). */
  env?: NodeJS.ProcessEnv;
  /** bwrap binary; default: found on PATH. */
  bwrapPath?: string | null;
  /** The compiled supervisor script; default: next to this module. */
  supervisorScript?: string;
  /** Node binary bound into the jail when its tree has none; default: this process's node. */
  nodeBinary?: string;
}

/** Sandbox directories sync may touch: the jail's writable binds. */
const SYNC_ROOTS = [SANDBOX_PATHS.workspace, SANDBOX_PATHS.home, SANDBOX_PATHS.tmp];

export function createBubblewrapPlugin(deps: BubblewrapPluginDeps = {}) {
  const env = deps.env ?? process.env;
  const bwrapPath = deps.bwrapPath === undefined ? findBwrap(env.PATH) : deps.bwrapPath;
  const supervisorScript = deps.supervisorScript ?? defaultSupervisorScript();
  const nodeBinary = deps.nodeBinary ?? fs.realpathSync(process.execPath);
  const runtime = new LeaseRuntime({
    bwrapPath: bwrapPath ?? "bwrap",
    supervisorScript,
    nodeBinary,
    resolver: createResolver(parseResolveOverrides(env[RESOLVE_ENV])),
  });
  let ctx: PluginContext | undefined;

  const stateDirOf = (config: BubblewrapConfig) => config.stateDir ?? defaultStateDir(env);

  /** Identity of the sandbox's shape, recomputable at resume (which has no agent/run params). */
  const shapeFingerprint = (companyId: string, environmentId: string, config: BubblewrapConfig) =>
    leaseFingerprint({ companyId, environmentId, resource: sandboxShape(config) });

  const leaseResult = (record: LeaseRecord): PluginEnvironmentLease => ({
    providerLeaseId: record.leaseId,
    metadata: {
      remoteCwd: SANDBOX_PATHS.workspace,
      fingerprint: record.fingerprint,
      reusable: record.reuse,
      egress: record.grant,
    },
    expiresAt: record.expiresAt,
  });

  /** The live lease for a hook that needs one (adopting it after a worker restart). */
  const requireLive = async (lease: PluginEnvironmentLease, config: BubblewrapConfig): Promise<LiveLease> => {
    const leaseId = lease.providerLeaseId;
    if (!isLeaseId(leaseId)) throw new Error(`not a bubblewrap lease id: ${String(leaseId)}`);
    const live = await runtime.get(stateDirOf(config), leaseId);
    if (!live) throw new LeaseGoneError(`bubblewrap lease ${leaseId} is not running (released, stopped or expired)`);
    return live;
  };

  // The kit recognises a proxy refusal in stderr ("CONNECT tunnel failed, response 403"); our proxy
  // also knows which destination it refused and why, so the note names that when it has it.
  const annotate = (live: LiveLease, deniedBefore: number) => (stderr: string) => {
    const denied = live.denials.slice(deniedBefore);
    const last = denied[denied.length - 1];
    const cause =
      last === undefined ? undefined : `the sandbox egress proxy refused ${denied.length} connection(s), last ${last.target}: ${last.reason}`;
    return appendBlockedNetworkNote(stderr, live.record.grant, { cause });
  };

  const writeSentinel = async (workspace: string, fingerprint: string, leaseId: string) => {
    const file = path.join(workspace, REUSE_SENTINEL_PATH);
    await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    await fsp.writeFile(file, buildSentinel({ fingerprint, providerLeaseId: leaseId }), { mode: 0o600 });
  };

  /** Reads the sentinel without following links the sandbox may have planted in its workspace. */
  const readSentinel = async (workspace: string): Promise<string | null> => {
    const dir = path.join(workspace, path.dirname(REUSE_SENTINEL_PATH));
    const stat = await fsp.lstat(dir).catch(() => null);
    if (!stat?.isDirectory()) return null;
    let handle: fsp.FileHandle | undefined;
    try {
      handle = await fsp.open(path.join(workspace, REUSE_SENTINEL_PATH), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
      const fileStat = await handle.stat();
      if (!fileStat.isFile() || fileStat.size > 4096) return null;
      return await handle.readFile("utf8");
    } catch {
      return null;
    } finally {
      await handle?.close();
    }
  };

  // The host's duplex bridge channels, each a command in the lease's jail through its supervisor.
  // Opens carry no config (so no state dir): the lease must be one this worker holds, which it does
  // once the run's executes have reached it.
  const duplex = createDuplexChannels({
    runnerFor: async ({ providerLeaseId }) => {
      const live = isLeaseId(providerLeaseId) ? runtime.held(providerLeaseId) : null;
      if (!live) throw new LeaseGoneError(`bubblewrap lease ${String(providerLeaseId)} is not running in this worker`);
      return { runner: live.client, leaseSignal: live.abort.signal };
    },
    notify: () => ctx?.duplexChannel,
    log: (message) => ctx?.logger.warn(message),
  });

  const release = async (
    params: PluginEnvironmentReleaseLeaseParams,
    mode: "release" | "destroy",
  ): Promise<PluginEnvironmentTerminationReceipt | void> => {
    const leaseId = params.providerLeaseId;
    if (!leaseId) return;
    if (!isLeaseId(leaseId)) throw new Error(`not a bubblewrap lease id: ${leaseId}`);
    const config = providerConfig.parse(params.config);
    const stateDir = stateDirOf(config);
    // Channels are long-lived by design: release would otherwise wait for them (or cut them off).
    await duplex.closeLease(leaseId);
    const stopped = await runtime.stop(stateDir, leaseId, { cancel: params.cancelActiveWork === true || mode === "destroy" });
    // No record: already destroyed (the host retries clean-up), so nothing of it runs.
    if (!stopped) {
      await removeTree(leasePaths(stateDir, leaseId).dir);
      return { providerLeaseId: leaseId, state: "destroyed" };
    }
    const keep = mode === "release" && stopped.reuse && Date.parse(stopped.expiresAt) > Date.now();
    if (keep) return { providerLeaseId: leaseId, state: "stopped" };
    await runtime.remove(stateDir, leaseId);
    return { providerLeaseId: leaseId, state: "destroyed" };
  };

  return definePlugin({
    async setup(context) {
      ctx = context;
    },

    async onShutdown() {
      // Jails outlive the worker on purpose (the next worker adopts them); only local handles go.
      await runtime.shutdown();
    },

    async onEnvironmentValidateConfig(params) {
      const result = providerConfig.validate(params.config);
      if (!result.ok) return result;
      const problem = checkSocketPathLength(stateDirOf(providerConfig.parse(params.config)));
      return problem ? { ok: false, errors: [problem], warnings: result.warnings } : result;
    },

    async onEnvironmentProbe(params) {
      const config = providerConfig.parse(params.config);
      return probeBubblewrap(config, { bwrapPath, supervisorScript, nodeBinary });
    },

    async onEnvironmentAcquireLease(params) {
      const config = providerConfig.parse(params.config);
      if (!bwrapPath) throw new Error("bubblewrap (bwrap) is not installed: apt-get install bubblewrap");
      const stateDir = stateDirOf(config);
      const socketProblem = checkSocketPathLength(stateDir);
      if (socketProblem) throw new Error(socketProblem);
      await ensureStateDir(stateDir);
      const { expiresAt } = resolveLeaseExpiry({
        requestedExpiresAt: params.requestedExpiresAt,
        defaultTtlMs: config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS,
      });
      // The task grant is read once, here; it stays fixed for the lease's life.
      const grant: EgressGrant = mergeEgressGrants(
        { allowFqdns: config.egressAllowFqdns, allowCidrs: config.egressAllowCidrs },
        normalizeEgressGrant(params.executionWorkspaceSettings),
      );
      const leaseId = newLeaseId();
      const paths = leasePaths(stateDir, leaseId);
      const fingerprint = leaseFingerprint({ ...params, resource: sandboxShape(config) });
      const labels = leaseLabels({ driverKey: params.driverKey ?? BUBBLEWRAP_DRIVER_KEY, environmentId: params.environmentId, runId: params.runId });
      const record: LeaseRecord = {
        version: 1,
        leaseId,
        state: "running",
        createdAt: new Date().toISOString(),
        expiresAt: expiresAt!.toISOString(),
        requestedExpiresAt: params.requestedExpiresAt ?? null,
        reuse: config.reuseLease,
        fingerprint,
        shapeFingerprint: shapeFingerprint(params.companyId, params.environmentId, config),
        grant,
        owner: { pid: process.pid, startTime: null, uid: process.getuid?.() ?? 0 },
        jail: null,
        cgroups: [],
        labels: { ...labels },
      };
      try {
        await createLeaseDirs(paths, generatedEtcFiles());
        // Written before the jail starts, so the leak clean-up never sees an anonymous directory.
        await writeLeaseRecord(paths, record);
        if (config.reuseLease) await writeSentinel(paths.workspace, fingerprint, leaseId);
        const live = await runtime.start(paths, record, { rootfs: config.rootfs, limits: config });
        return leaseResult(live.record);
      } catch (error) {
        try {
          await runtime.stop(stateDir, leaseId, { cancel: true });
          await runtime.remove(stateDir, leaseId);
        } catch {
          throw new CreationCleanupError(
            { providerLeaseId: leaseId, companyId: params.companyId, environmentId: params.environmentId, runId: params.runId, labels },
            error,
          );
        }
        throw error;
      }
    },

    async onEnvironmentResumeLease(params) {
      const config = providerConfig.parse(params.config);
      const stateDir = stateDirOf(config);
      const gone = { providerLeaseId: null, metadata: { expired: true } };
      if (!isLeaseId(params.providerLeaseId)) return gone;
      const found = await runtime.record(stateDir, params.providerLeaseId);
      if (!found || Date.parse(found.record.expiresAt) <= Date.now()) return gone;
      const { paths, record } = found;
      const expected = params.leaseMetadata?.fingerprint;
      const sameSandbox =
        (expected === undefined || expected === record.fingerprint) &&
        record.shapeFingerprint === shapeFingerprint(params.companyId, params.environmentId, config) &&
        (!record.reuse || sentinelMatches(await readSentinel(paths.workspace), record.fingerprint ?? ""));
      if (!sameSandbox) return { providerLeaseId: null, metadata: { expired: true, identityMismatch: true } };
      // Running (e.g. adopted after a worker restart): hand it back as it is.
      const live = await runtime.get(stateDir, record.leaseId);
      if (live) return leaseResult(live.record);
      if (record.state === "running" && record.jail) {
        // Its jail ended on its own (expiry, crash): tidy up what is left before restarting.
        await runtime.stop(stateDir, record.leaseId, { cancel: true });
      }
      const restarted = await runtime.start(paths, { ...record, jail: null, cgroups: [] }, { rootfs: config.rootfs, limits: config });
      return leaseResult(restarted.record);
    },

    async onEnvironmentReleaseLease(params) {
      return release(params, "release");
    },

    async onEnvironmentDestroyLease(params) {
      return release(params, "destroy");
    },

    async onEnvironmentRealizeWorkspace(params) {
      const config = providerConfig.parse(params.config);
      await requireLive(params.lease, config);
      return { cwd: SANDBOX_PATHS.workspace };
    },

    async onEnvironmentExecute(params) {
      const config = providerConfig.parse(params.config);
      const live = await requireLive(params.lease, config);
      return runtime.track(
        live,
        executeCommand(live.client, execRequestFrom(params, SANDBOX_PATHS.workspace), {
          log: (stream, text) => ctx?.execution.log(stream, text),
          defaultTimeoutMs: config.timeoutMs,
          signal: live.abort.signal,
          annotateStderr: annotate(live, live.denials.length),
        }),
      );
    },

    async onEnvironmentSyncIn(params) {
      const config = providerConfig.parse(params.config);
      const live = await requireLive(params.lease, config);
      return runtime.track(live, syncIn(live.client, params.operations, { roots: SYNC_ROOTS, signal: live.abort.signal }));
    },

    async onEnvironmentSyncOut(params) {
      const config = providerConfig.parse(params.config);
      const live = await requireLive(params.lease, config);
      return runtime.track(live, syncOut(live.client, params.operations, { roots: SYNC_ROOTS, signal: live.abort.signal }));
    },

    onDuplexChannelOpen: (params) => duplex.open(params),
    onDuplexChannelWrite: (params) => duplex.write(params),
    onDuplexChannelStop: (params) => duplex.stop(params),
    onDuplexChannelClose: (params) => duplex.close(params),
  });
}

export default createBubblewrapPlugin();
