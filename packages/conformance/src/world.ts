import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type {
  PluginEnvironmentAcquireLeaseParams,
  PluginEnvironmentDriverBaseParams,
  PluginEnvironmentExecuteParams,
  PluginEnvironmentExecuteResult,
  PluginEnvironmentLease,
  PluginEnvironmentTerminationReceipt,
} from "@paperclipai/plugin-sdk";
import type { PluginEnvironmentDriverDeclaration } from "@paperclipai/plugin-sdk";
import { loadPluginPackage, startWorker, type CallOptions, type WorkerClient } from "@paperclip-sandbox/worker-client";
import { acquireParams, baseParams, hostIdentity, type HostIdentity } from "./host-params.js";
import type { ConformanceOptions, LeftoversContext } from "./options.js";

export interface AcquiredLease {
  lease: PluginEnvironmentLease;
  providerLeaseId: string;
  /** `metadata.remoteCwd`: the lease's sandbox working directory. */
  remoteCwd: string;
  config: Record<string, unknown>;
}

export type ShellOptions = Partial<Omit<PluginEnvironmentExecuteParams, "lease" | "command" | "args">> & {
  call?: CallOptions;
};

/** Everything a case needs: one worker for the whole suite, host-side scratch, lease helpers. */
export interface ConformanceWorld {
  readonly options: ConformanceOptions;
  readonly client: WorkerClient;
  /** The manifest's declaration of the driver under test (what the host reads capabilities from). */
  readonly driver: PluginEnvironmentDriverDeclaration | undefined;
  readonly identity: HostIdentity;
  /** Host scratch directory for this run (removed at close). */
  readonly hostDir: string;
  readonly leftoversContext: LeftoversContext;
  base(config?: Record<string, unknown>): PluginEnvironmentDriverBaseParams;
  acquire(config?: Record<string, unknown>, extra?: Partial<PluginEnvironmentAcquireLeaseParams>): Promise<AcquiredLease>;
  /** SIGKILLs the worker (as a crash would) and forks a fresh one; `client` is the new one afterwards. */
  restartWorker(): Promise<void>;
  /** Record a lease the suite got some other way (resume), so leftovers can look for it. */
  track(lease: PluginEnvironmentLease): void;
  release(acquired: AcquiredLease, extra?: { cancelActiveWork?: boolean }): Promise<PluginEnvironmentTerminationReceipt | null>;
  destroy(acquired: AcquiredLease): Promise<PluginEnvironmentTerminationReceipt | null>;
  /** Acquire, run `fn`, and destroy the lease whatever happens. */
  withLease<T>(fn: (acquired: AcquiredLease) => Promise<T>, config?: Record<string, unknown>): Promise<T>;
  /** `sh -c script` in the lease, cwd = remoteCwd unless given. */
  sh(acquired: AcquiredLease, script: string, opts?: ShellOptions): Promise<PluginEnvironmentExecuteResult>;
  close(): Promise<void>;
}

export async function startConformanceWorld(options: ConformanceOptions): Promise<ConformanceWorld> {
  const pkg = await loadPluginPackage(options.pluginDir);
  let client = await startWorker(pkg, { env: options.workerEnv });
  const hostDir = await mkdtemp(path.join(os.tmpdir(), "paperclip-conformance-"));
  const identity = hostIdentity();
  const leaseIds: string[] = [];
  const remoteCwds: string[] = [];

  const base = (config = options.config) => baseParams(identity, options.driverKey, config);

  const track = (lease: PluginEnvironmentLease) => {
    if (lease.providerLeaseId && !leaseIds.includes(lease.providerLeaseId)) leaseIds.push(lease.providerLeaseId);
    const cwd = lease.metadata?.remoteCwd;
    if (typeof cwd === "string" && !remoteCwds.includes(cwd)) remoteCwds.push(cwd);
  };

  const acquire = async (config = options.config, extra: Partial<PluginEnvironmentAcquireLeaseParams> = {}): Promise<AcquiredLease> => {
    const lease = await client.env.acquireLease({ ...acquireParams(identity, options.driverKey, config), ...extra });
    track(lease);
    if (typeof lease.providerLeaseId !== "string" || lease.providerLeaseId.length === 0) {
      throw new Error(`acquireLease returned no providerLeaseId: ${JSON.stringify(lease)}`);
    }
    const remoteCwd = lease.metadata?.remoteCwd;
    if (typeof remoteCwd !== "string" || !remoteCwd.startsWith("/")) {
      throw new Error(`acquireLease must return an absolute metadata.remoteCwd, got ${JSON.stringify(remoteCwd)}`);
    }
    return { lease, providerLeaseId: lease.providerLeaseId, remoteCwd, config };
  };

  const leaseParams = (acquired: AcquiredLease) => ({
    ...base(acquired.config),
    providerLeaseId: acquired.providerLeaseId,
    leaseMetadata: acquired.lease.metadata,
  });

  const release = async (acquired: AcquiredLease, extra: { cancelActiveWork?: boolean } = {}) => (await client.env.releaseLease({ ...leaseParams(acquired), ...extra })) ?? null;
  const destroy = async (acquired: AcquiredLease) => (await client.env.destroyLease(leaseParams(acquired))) ?? null;

  const withLease = async <T>(fn: (acquired: AcquiredLease) => Promise<T>, config?: Record<string, unknown>) => {
    const acquired = await acquire(config);
    let result: T;
    try {
      result = await fn(acquired);
    } catch (error) {
      // The case's own failure is the one worth reporting; cleanup is best effort here.
      await destroy(acquired).catch(() => undefined);
      throw error;
    }
    await destroy(acquired);
    return result;
  };

  const sh = (acquired: AcquiredLease, script: string, opts: ShellOptions = {}) => {
    const { call, ...rest } = opts;
    return client.env.execute({ ...base(acquired.config), lease: acquired.lease, command: "sh", args: ["-c", script], cwd: acquired.remoteCwd, ...rest }, call);
  };

  const restartWorker = async () => {
    client.kill("SIGKILL");
    await client.exited;
    client = await startWorker(pkg, { env: options.workerEnv });
  };

  return {
    options,
    get client() {
      return client;
    },
    restartWorker,
    driver: pkg.manifest.environmentDrivers?.find((d) => d.driverKey === options.driverKey),
    identity,
    hostDir,
    leftoversContext: { leaseIds, remoteCwds },
    base,
    acquire,
    track,
    release,
    destroy,
    withLease,
    sh,
    close: async () => {
      try {
        await client.shutdown();
      } finally {
        await rm(hostDir, { recursive: true, force: true });
      }
    },
  };
}
