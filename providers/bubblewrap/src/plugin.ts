import fs from "node:fs";
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
  createResolver,
  createSandboxBackend,
  defaultSupervisorScript,
  parseResolveOverrides,
  RESOLVE_ENV,
  SANDBOX_PATHS,
  type Sandbox,
  type SandboxBackend,
} from "@paperclip-sandbox/sandbox-backend";
import { findBwrap, probeBubblewrap } from "./probe.js";
import { BUBBLEWRAP_DRIVER_KEY } from "./manifest.js";
import { defaultStateDir, isLeaseId, leaseMetadataOf, newLeaseId, type LeaseMetadata } from "./leases.js";

export interface BubblewrapPluginDeps {
  /** The worker's environment (for PAPERCLIP_BUBBLEWRAP_RESOLVE and XDG_STATE_HOME). */
  env?: NodeJS.ProcessEnv;
  /** bwrap binary; default: found on PATH. */
  bwrapPath?: string | null;
  /** The compiled supervisor script; default: the backend's. */
  supervisorScript?: string;
  /** Node binary bound into the jail when its tree has none; default: this process's node. */
  nodeBinary?: string;
}

export class LeaseGoneError extends Error {
  override name = "LeaseGoneError";
}

/** Sandbox directories sync may touch: the jail's writable binds. */
const SYNC_ROOTS = [SANDBOX_PATHS.workspace, SANDBOX_PATHS.home, SANDBOX_PATHS.tmp];
const SENTINEL_FILE = `${SANDBOX_PATHS.workspace}/${REUSE_SENTINEL_PATH}`;
const WORKSPACE_ONLY = { roots: [SANDBOX_PATHS.workspace] };

/** A lease this worker holds: its sandbox, its in-flight work (release drains or cancels it). */
interface HeldLease {
  sandbox: Sandbox;
  work: Set<Promise<unknown>>;
  abort: AbortController;
}

export function createBubblewrapPlugin(deps: BubblewrapPluginDeps = {}) {
  const env = deps.env ?? process.env;
  const bwrapPath = deps.bwrapPath === undefined ? findBwrap(env.PATH) : deps.bwrapPath;
  const supervisorScript = deps.supervisorScript ?? defaultSupervisorScript();
  const nodeBinary = deps.nodeBinary ?? fs.realpathSync(process.execPath);
  const resolver = createResolver(parseResolveOverrides(env[RESOLVE_ENV]));
  // One backend per state directory (the config chooses it).
  const backends = new Map<string, SandboxBackend>();
  const held = new Map<string, HeldLease>();
  let ctx: PluginContext | undefined;

  const stateDirOf = (config: BubblewrapConfig) => config.stateDir ?? defaultStateDir(env);

  const backendFor = (config: BubblewrapConfig): SandboxBackend => {
    const stateDir = stateDirOf(config);
    let backend = backends.get(stateDir);
    if (!backend) {
      backend = createSandboxBackend({ stateDir, bwrapPath: bwrapPath ?? "bwrap", supervisorScript, nodeBinary, resolver });
      backends.set(stateDir, backend);
    }
    return backend;
  };

  const hold = (sandbox: Sandbox): HeldLease => {
    let lease = held.get(sandbox.id);
    if (!lease || lease.sandbox !== sandbox) {
      lease = { sandbox, work: new Set(), abort: new AbortController() };
      held.set(sandbox.id, lease);
    }
    return lease;
  };

  /** Tracks a unit of work so release can drain or cancel it. */
  const track = <T>(lease: HeldLease, work: Promise<T>): Promise<T> => {
    lease.work.add(work);
    void work.finally(() => lease.work.delete(work)).catch(() => undefined);
    return work;
  };

  /** Identity of the sandbox's shape, recomputable at resume (which has no agent/run params). */
  const shapeFingerprint = (companyId: string, environmentId: string, config: BubblewrapConfig) =>
    leaseFingerprint({ companyId, environmentId, resource: sandboxShape(config) });

  const leaseResult = (sandbox: Sandbox): PluginEnvironmentLease => {
    const lease = leaseMetadataOf(sandbox.metadata);
    return {
      providerLeaseId: sandbox.id,
      metadata: {
        remoteCwd: SANDBOX_PATHS.workspace,
        fingerprint: lease.fingerprint,
        reusable: lease.reuse,
        egress: lease.grant,
      },
      expiresAt: new Date(sandbox.expiresAt).toISOString(),
    };
  };

  /** The live lease for a hook that needs one (adopting it after a worker restart). */
  const requireLive = async (lease: PluginEnvironmentLease, config: BubblewrapConfig): Promise<HeldLease> => {
    const leaseId = lease.providerLeaseId;
    if (!isLeaseId(leaseId)) throw new Error(`not a bubblewrap lease id: ${String(leaseId)}`);
    const sandbox = await backendFor(config).get(leaseId);
    if (!sandbox || sandbox.state !== "running") throw new LeaseGoneError(`bubblewrap lease ${leaseId} is not running (released, stopped or expired)`);
    return hold(sandbox);
  };

  // The kit recognises a proxy refusal in stderr ("CONNECT tunnel failed, response 403"); our proxy
  // also knows which destination it refused and why, so the note names that when it has it.
  const annotate = (sandbox: Sandbox, deniedBefore: number) => (stderr: string) => {
    const denied = sandbox.denials.slice(deniedBefore);
    const last = denied[denied.length - 1];
    const cause =
      last === undefined ? undefined : `the sandbox egress proxy refused ${denied.length} connection(s), last ${last.target}: ${last.reason}`;
    return appendBlockedNetworkNote(stderr, sandbox.egress, { cause });
  };

  // Inside the jail (by its supervisor, as the sandbox user), never through the host directories
  // sandboxed code can plant links in.
  const writeSentinel = async (sandbox: Sandbox, fingerprint: string) => {
    await sandbox.files.mkdir(path.posix.dirname(SENTINEL_FILE), { mode: 0o700, ...WORKSPACE_ONLY });
    await sandbox.files.write(SENTINEL_FILE, buildSentinel({ fingerprint, providerLeaseId: sandbox.id }), { mode: 0o600, createParents: false, ...WORKSPACE_ONLY });
  };

  // Read from the disk without following any link (also while the lease is stopped, so a resume
  // need not wait for a jail to answer before it knows it may restart it).
  const readSentinel = async (sandbox: Sandbox): Promise<string | null> =>
    (await sandbox.readStoredFile(SENTINEL_FILE, { maxBytes: 4096 }))?.toString("utf8") ?? null;

  // The host's duplex bridge channels, each a command in the lease's jail through its supervisor.
  // Opens carry no config (so no state dir): the lease must be one this worker holds, which it does
  // once the run's executes have reached it.
  const duplex = createDuplexChannels({
    runnerFor: async ({ providerLeaseId }) => {
      const lease = isLeaseId(providerLeaseId) ? held.get(providerLeaseId) : undefined;
      if (!lease || lease.sandbox.state !== "running") throw new LeaseGoneError(`bubblewrap lease ${String(providerLeaseId)} is not running in this worker`);
      return { runner: lease.sandbox.runner, leaseSignal: lease.abort.signal };
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
    const backend = backendFor(providerConfig.parse(params.config));
    // Channels are long-lived by design: release would otherwise wait for them (or cut them off).
    await duplex.closeLease(leaseId);
    const lease = held.get(leaseId);
    held.delete(leaseId);
    if (lease) {
      if (params.cancelActiveWork === true || mode === "destroy") lease.abort.abort();
      else await Promise.allSettled([...lease.work]);
    }
    // Kept (stopped) only when reusable and not expired; otherwise, and when already destroyed (the
    // host retries clean-up), destroyed. Deciding needs no adoption (proxy) of the lease.
    const summary = await backend.summary(leaseId);
    const keep = mode === "release" && summary !== null && summary.state !== "incomplete" && !summary.expired && leaseMetadataOf(summary.metadata).reuse;
    const sandbox = keep ? (lease?.sandbox.state === "running" ? lease.sandbox : await backend.get(leaseId)) : null;
    if (sandbox) {
      await sandbox.stop();
      return { providerLeaseId: leaseId, state: "stopped" };
    }
    await backend.destroy(leaseId);
    return { providerLeaseId: leaseId, state: "destroyed" };
  };

  return definePlugin({
    async setup(context) {
      ctx = context;
    },

    async onShutdown() {
      // Jails outlive the worker on purpose (the next worker adopts them); only local handles go.
      held.clear();
      await Promise.all([...backends.values()].map((backend) => backend.close()));
      backends.clear();
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
      const socketProblem = checkSocketPathLength(stateDirOf(config));
      if (socketProblem) throw new Error(socketProblem);
      const backend = backendFor(config);
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
      const fingerprint = leaseFingerprint({ ...params, resource: sandboxShape(config) });
      const labels = leaseLabels({ driverKey: params.driverKey ?? BUBBLEWRAP_DRIVER_KEY, environmentId: params.environmentId, runId: params.runId });
      const metadata: LeaseMetadata = {
        fingerprint,
        shapeFingerprint: shapeFingerprint(params.companyId, params.environmentId, config),
        reuse: config.reuseLease,
        grant,
        requestedExpiresAt: params.requestedExpiresAt ?? null,
      };
      try {
        const sandbox = await backend.create({
          id: leaseId,
          rootfs: config.rootfs,
          limits: { cpu: config.cpu, memoryMb: config.memoryMb, pids: config.pids },
          expiresAt: expiresAt!.getTime(),
          egress: grant,
          labels: { ...labels },
          metadata: { ...metadata },
        });
        if (config.reuseLease) await writeSentinel(sandbox, fingerprint);
        hold(sandbox);
        return leaseResult(sandbox);
      } catch (error) {
        try {
          await backend.destroy(leaseId);
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
      const gone = { providerLeaseId: null, metadata: { expired: true } };
      const mismatch = { providerLeaseId: null, metadata: { expired: true, identityMismatch: true } };
      if (!isLeaseId(params.providerLeaseId)) return gone;
      // Null when there is no such lease or it has expired; a live one is adopted after a worker restart.
      const sandbox = await backendFor(config).get(params.providerLeaseId);
      if (!sandbox) return gone;
      const lease = leaseMetadataOf(sandbox.metadata);
      const expected = params.leaseMetadata?.fingerprint;
      const sameShape =
        (expected === undefined || expected === lease.fingerprint) && lease.shapeFingerprint === shapeFingerprint(params.companyId, params.environmentId, config);
      if (!sameShape) return mismatch;
      if (lease.reuse && !sentinelMatches(await readSentinel(sandbox), lease.fingerprint ?? "")) return mismatch;
      // Stopped (reuse), or its jail ended on its own: a fresh jail on the same disk.
      if (sandbox.state !== "running") await sandbox.start();
      hold(sandbox);
      return leaseResult(sandbox);
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
      const lease = await requireLive(params.lease, config);
      const { sandbox } = lease;
      return track(
        lease,
        executeCommand(sandbox.runner, execRequestFrom(params, SANDBOX_PATHS.workspace), {
          log: (stream, text) => ctx?.execution.log(stream, text),
          defaultTimeoutMs: config.timeoutMs,
          signal: lease.abort.signal,
          annotateStderr: annotate(sandbox, sandbox.denials.length),
        }),
      );
    },

    async onEnvironmentSyncIn(params) {
      const config = providerConfig.parse(params.config);
      const lease = await requireLive(params.lease, config);
      return track(lease, syncIn(lease.sandbox.runner, params.operations, { roots: SYNC_ROOTS, signal: lease.abort.signal }));
    },

    async onEnvironmentSyncOut(params) {
      const config = providerConfig.parse(params.config);
      const lease = await requireLive(params.lease, config);
      return track(lease, syncOut(lease.sandbox.runner, params.operations, { roots: SYNC_ROOTS, signal: lease.abort.signal }));
    },

    onDuplexChannelOpen: (params) => duplex.open(params),
    onDuplexChannelWrite: (params) => duplex.write(params),
    onDuplexChannelStop: (params) => duplex.stop(params),
    onDuplexChannelClose: (params) => duplex.close(params),
  });
}

export default createBubblewrapPlugin();
