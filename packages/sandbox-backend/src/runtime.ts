/**
 * The live side of leases in one worker: starting a lease's jail (cgroups, egress proxy, bwrap),
 * adopting a lease another worker started (from its directory), and ending it with confirmation.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { createLeaseCgroups, removeCgroups, type Limits } from "./jail/cgroups.js";
import { startEgressProxy, type EgressDenial, type EgressProxy } from "./egress/proxy.js";
import { buildJailArgv, SANDBOX_PATHS } from "./jail/argv.js";
import { JAIL_INFO_FD, jailAlive, launchJail, stopJail, type LaunchedJail } from "./jail/process.js";
import {
  leasePaths,
  processStartTime,
  readLeaseRecord,
  removeTree,
  writeLeaseRecord,
  type LeasePaths,
  type LeaseRecord,
} from "./store/lease-store.js";
import type { Resolver } from "./egress/resolver.js";
import { EGRESS_PROXY_PORT, grantIsEmpty, sandboxBaseEnv } from "./jail/sandbox-env.js";
import { SupervisorClient } from "./supervisor/client.js";

export interface RuntimeDeps {
  bwrapPath: string;
  /** Host path of the compiled supervisor script. */
  supervisorScript: string;
  /** Host path of the node binary to bind when the tree has none. */
  nodeBinary: string;
  resolver: Resolver & { pinned?(host: string): boolean };
}

export interface JailSettings {
  rootfs?: string;
  limits: Limits;
}

export interface LiveLease {
  leaseId: string;
  paths: LeasePaths;
  record: LeaseRecord;
  client: SupervisorClient;
  proxy: EgressProxy | null;
  /** Set while this worker is the jail's parent (it started the jail). */
  launched: LaunchedJail | null;
  denials: EgressDenial[];
  /** In-flight executes and syncs of this worker, so release can drain or cancel them. */
  work: Set<Promise<unknown>>;
  abort: AbortController;
  /** Called when this worker sees the jail's bwrap exit (only while it is the jail's parent). */
  goneListeners: Set<(error: Error) => void>;
}

/** Its jail is alive and its expiry not reached. */
function isRunning(lease: LiveLease): boolean {
  return lease.record.jail !== null && jailAlive(lease.record.jail) && Date.parse(lease.record.expiresAt) > Date.now();
}

export class LeaseGoneError extends Error {
  override name = "LeaseGoneError";
}

export class LeaseRuntime {
  private readonly live = new Map<string, LiveLease>();
  private readonly adopting = new Map<string, Promise<LiveLease | null>>();

  constructor(private readonly deps: RuntimeDeps) {}

  /** Starts (or restarts, for a resumed reusable lease) the jail of a lease whose directory exists. */
  async start(paths: LeasePaths, record: LeaseRecord, settings: JailSettings): Promise<LiveLease> {
    const leaseId = record.leaseId;
    const cgroups = await createLeaseCgroups(leaseId, settings.limits);
    record.cgroups = cgroups.dirs;
    const lease = newLiveLease(leaseId, paths, record);
    // Everything started from here on (proxy, jail) is ended again if the start fails at any step:
    // the record on disk does not name the cgroups or the jail yet, so no later stop could find them.
    try {
      if (!grantIsEmpty(record.grant)) lease.proxy = await this.startProxy(lease);
      const layout = {
        workspaceDir: paths.workspace,
        homeDir: paths.home,
        cacheDir: paths.cache,
        tmpDir: paths.tmp,
        etcDir: paths.etc,
        egressDir: lease.proxy ? paths.egress : undefined,
        supervisorScript: this.deps.supervisorScript,
        nodeBinary: this.deps.nodeBinary,
        rootfs: settings.rootfs,
      };
      // The PATH depends on where node ends up, which the argv builder decides: build once to learn it.
      const probe = buildJailArgv(layout, "{}", JAIL_INFO_FD);
      const supervisorConfig = {
        expiresAt: Date.parse(record.expiresAt),
        baseEnv: sandboxBaseEnv(record.grant, probe.path),
        defaultCwd: SANDBOX_PATHS.workspace,
        egress: lease.proxy ? { port: EGRESS_PROXY_PORT, socketPath: `${SANDBOX_PATHS.egressDir}/${path.basename(paths.egressSocket)}` } : undefined,
      };
      const jail = buildJailArgv(layout, JSON.stringify(supervisorConfig), JAIL_INFO_FD);
      lease.launched = await launchJail({
        bwrapPath: this.deps.bwrapPath,
        bwrapArgs: jail.argv,
        socketPath: paths.socket,
        logPath: paths.log,
        cgroupProcs: cgroups.procsFiles,
        expiresAt: Date.parse(record.expiresAt),
      });
      void lease.launched.exited.then(() => {
        const error = new LeaseGoneError(`the jail of lease ${leaseId} has ended (see ${path.basename(paths.log)} in the lease directory)`);
        for (const listener of [...lease.goneListeners]) listener(error);
      });
      record.jail = lease.launched.record;
      record.state = "running";
      record.owner = ownerIdentity();
      await writeLeaseRecord(paths, record);
    } catch (error) {
      if (lease.launched) await stopJail(lease.launched.record, cgroups.dirs, { exited: lease.launched.exited }).catch(() => undefined);
      await lease.proxy?.close();
      record.cgroups = await removeCgroups(cgroups.dirs);
      record.jail = null;
      throw error;
    }
    lease.client = this.clientFor(lease);
    this.live.set(leaseId, lease);
    return lease;
  }

  /**
   * The live lease, adopting it from its directory when another (e.g. a crashed) worker started it.
   * Null when there is no such lease, it is stopped, expired, or its jail is gone.
   */
  async get(stateDir: string, leaseId: string): Promise<LiveLease | null> {
    const known = this.live.get(leaseId);
    if (known) {
      if (isRunning(known)) return known;
      await this.forget(leaseId);
      return null;
    }
    let pending = this.adopting.get(leaseId);
    if (!pending) {
      pending = this.adopt(stateDir, leaseId).finally(() => this.adopting.delete(leaseId));
      this.adopting.set(leaseId, pending);
    }
    return pending;
  }

  /** The live lease this worker already holds (no adoption: callers without a config cannot locate its state dir). */
  held(leaseId: string): LiveLease | null {
    const known = this.live.get(leaseId);
    return known && isRunning(known) ? known : null;
  }

  private async adopt(stateDir: string, leaseId: string): Promise<LiveLease | null> {
    const paths = leasePaths(stateDir, leaseId);
    const record = await readLeaseRecord(paths);
    if (!record || record.state !== "running" || !record.jail) return null;
    if (!jailAlive(record.jail) || Date.parse(record.expiresAt) <= Date.now()) return null;
    const lease = newLiveLease(leaseId, paths, record);
    // The previous worker's proxy died with it: serve the grant again on the same socket path
    // (the jail binds the directory, so it sees the new socket).
    if (!grantIsEmpty(record.grant)) lease.proxy = await this.startProxy(lease);
    lease.client = this.clientFor(lease);
    record.owner = ownerIdentity();
    await writeLeaseRecord(paths, record);
    this.live.set(leaseId, lease);
    return lease;
  }

  /** Lease record from disk (or memory), live or not. */
  async record(stateDir: string, leaseId: string): Promise<{ paths: LeasePaths; record: LeaseRecord } | null> {
    const known = this.live.get(leaseId);
    if (known) return { paths: known.paths, record: known.record };
    const paths = leasePaths(stateDir, leaseId);
    const record = await readLeaseRecord(paths);
    return record ? { paths, record } : null;
  }

  /** Tracks a unit of work so release can drain or cancel it. */
  track<T>(lease: LiveLease, work: Promise<T>): Promise<T> {
    lease.work.add(work);
    void work.finally(() => lease.work.delete(work)).catch(() => undefined);
    return work;
  }

  /**
   * Ends every process of the lease's jail (confirmed) and its proxy and cgroups. With `cancel`,
   * in-flight work is aborted at once; otherwise this worker's in-flight work is drained first.
   */
  async stop(stateDir: string, leaseId: string, options: { cancel: boolean }): Promise<LeaseRecord | null> {
    // A lease this worker does not hold needs no adoption (proxy, client) just to be stopped: its
    // record is enough. An adoption already under way is waited for, so its handles are dropped too.
    const live = this.live.get(leaseId) ?? (await this.adopting.get(leaseId)?.catch(() => null)) ?? null;
    const found = await this.record(stateDir, leaseId);
    if (!found) return null;
    const { paths, record } = found;
    if (live) {
      if (options.cancel) live.abort.abort();
      else await Promise.allSettled([...live.work]);
    }
    if (record.jail) await stopJail(record.jail, record.cgroups, { exited: live?.launched?.exited });
    await this.forget(leaseId);
    const left = await removeCgroups(record.cgroups);
    record.cgroups = left;
    record.jail = null;
    record.state = "stopped";
    await fsp.rm(paths.socket, { force: true });
    if (fs.existsSync(paths.dir)) await writeLeaseRecord(paths, record);
    return record;
  }

  /** Removes the lease directory; the jail must already be stopped. */
  async remove(stateDir: string, leaseId: string): Promise<void> {
    await this.forget(leaseId);
    await removeTree(leasePaths(stateDir, leaseId).dir);
  }

  /** Drops this worker's handles (proxy) without touching the jail, e.g. at worker shutdown. */
  async forget(leaseId: string): Promise<void> {
    const live = this.live.get(leaseId);
    this.live.delete(leaseId);
    await live?.proxy?.close();
  }

  async shutdown(): Promise<void> {
    await Promise.all([...this.live.keys()].map((leaseId) => this.forget(leaseId)));
  }

  private clientFor(lease: LiveLease): SupervisorClient {
    return new SupervisorClient({
      socketPath: lease.paths.socket,
      // A command sent before the supervisor accepts waits in the backlog: stop waiting if the jail dies.
      watchJail: (onGone) => {
        lease.goneListeners.add(onGone);
        return () => lease.goneListeners.delete(onGone);
      },
    });
  }

  private startProxy(lease: LiveLease): Promise<EgressProxy> {
    return startEgressProxy({
      socketPath: lease.paths.egressSocket,
      grant: lease.record.grant,
      resolver: this.deps.resolver,
      onDenied: (denial) => {
        lease.denials.push(denial);
        if (lease.denials.length > 100) lease.denials.shift();
      },
    });
  }
}

function ownerIdentity(): LeaseRecord["owner"] {
  return { pid: process.pid, startTime: processStartTime(process.pid), uid: process.getuid?.() ?? 0 };
}

/** A lease's in-worker state before its proxy and supervisor client are attached. */
function newLiveLease(leaseId: string, paths: LeasePaths, record: LeaseRecord): LiveLease {
  return {
    leaseId,
    paths,
    record,
    client: null as unknown as SupervisorClient,
    proxy: null,
    launched: null,
    denials: [],
    work: new Set(),
    abort: new AbortController(),
    goneListeners: new Set(),
  };
}
