import { randomUUID } from "node:crypto";
import { labelValue } from "@paperclip-sandbox/kit";
import { TIMEOUT, WORKER_UNAVAILABLE, WorkerRpcError } from "@paperclip-sandbox/worker-client";
import type { PluginEnvironmentLease, PluginEnvironmentTerminationReceipt } from "@paperclipai/plugin-sdk";
import { describeError } from "./errors.js";
import { currentOwner } from "./host-identity.js";
import { LeaseDb } from "./lease-db.js";
import { configFingerprint, storableConfig, type PreparedProvider } from "./provider-setup.js";
import type { ProviderSession } from "./provider-session.js";

/** A lease the CLI holds, with the database row that tracks it. */
export interface TrackedLease {
  rowId: string;
  runId: string;
  lease: PluginEnvironmentLease;
  /** The provider may keep this lease on release (reusable lease and reuse enabled). */
  reusable: boolean;
  /** True when it came from `resumeLease` rather than a fresh acquire. */
  resumed: boolean;
}

/** Labels as the kit's providers put them on resources (`leaseLabels`), plus who made it. */
function cliLabels(driverKey: string, environmentId: string, runId: string, hostId: string, purpose: string): Record<string, string> {
  return {
    "paperclip-provider": labelValue(driverKey),
    "paperclip-environment": labelValue(environmentId),
    "paperclip-run": labelValue(runId),
    "managed-by": "paperclip-sandbox-cli",
    "created-by-host": hostId,
    purpose,
  };
}

/** An acquire whose outcome is unknown (timeout, worker gone) may have created something: keep the row live. */
function outcomeUnknown(error: unknown): boolean {
  return error instanceof WorkerRpcError && (error.code === TIMEOUT || error.code === WORKER_UNAVAILABLE);
}

/** Acquire / resume / release / destroy through a session, recording each step in the lease database first. */
export class LeaseTracker {
  readonly #db: LeaseDb;
  readonly #prepared: PreparedProvider;
  readonly #purpose: string;

  constructor(db: LeaseDb, prepared: PreparedProvider, purpose: "run" | "bench") {
    this.#db = db;
    this.#prepared = prepared;
    this.#purpose = purpose;
  }

  get db(): LeaseDb {
    return this.#db;
  }

  #storedConfig(session: ProviderSession) {
    return storableConfig(this.#prepared, session.config);
  }

  reusableFor(session: ProviderSession): boolean {
    return this.#prepared.provider.supportsReusableLeases && session.config.reuseLease === true;
  }

  fingerprint(session: ProviderSession): string {
    return configFingerprint(session.driverKey, this.#storedConfig(session));
  }

  async acquire(session: ProviderSession, extra: { requestedCwd?: string } = {}): Promise<TrackedLease> {
    const owner = currentOwner();
    const rowId = randomUUID();
    const runId = `cli-${rowId}`;
    const reusable = this.reusableFor(session);
    const stored = this.#storedConfig(session);
    this.#db.insertAcquiring({
      id: rowId,
      provider: session.driverKey,
      pluginDir: this.#prepared.provider.pkg.dir,
      companyId: "paperclip-sandbox-cli",
      environmentId: session.environmentId,
      runId,
      labels: cliLabels(session.driverKey, session.environmentId, runId, owner.hostId, this.#purpose),
      reusable,
      config: stored,
      configFingerprint: configFingerprint(session.driverKey, stored),
      owner,
      purpose: this.#purpose,
    });
    let lease: PluginEnvironmentLease;
    try {
      lease = await session.acquire(runId, extra);
    } catch (error) {
      const message = this.#prepared.redactor.redact(describeError(error));
      this.#db.setState(rowId, outcomeUnknown(error) ? "acquiring" : "failed", message);
      throw error;
    }
    this.#recordLease(rowId, lease);
    return { rowId, runId, lease, reusable, resumed: false };
  }

  #recordLease(rowId: string, lease: PluginEnvironmentLease, owner?: ReturnType<typeof currentOwner>): void {
    this.#db.markActive(
      rowId,
      {
        providerLeaseId: lease.providerLeaseId,
        metadata: lease.metadata ? this.#prepared.redactor.redactDeep(lease.metadata) : null,
        expiresAt: lease.expiresAt ?? null,
      },
      owner,
    );
  }

  /**
   * Resumes the newest idle lease recorded for this provider and config, if any. Returns undefined
   * when there is none or the provider says it is gone (that row is marked lost).
   */
  async resumeIdle(session: ProviderSession): Promise<TrackedLease | undefined> {
    const fingerprint = this.fingerprint(session);
    for (;;) {
      const row = this.#db.findIdleReusable(session.driverKey, this.#prepared.provider.pkg.dir, fingerprint);
      if (!row || !row.providerLeaseId) return undefined;
      const owner = currentOwner();
      if (!this.#db.claimIdle(row.id, owner)) continue; // another CLI took it; look again
      let lease: PluginEnvironmentLease;
      try {
        lease = await session.resume(row.providerLeaseId, row.leaseMetadata ?? undefined);
      } catch (error) {
        this.#db.setState(row.id, "idle", this.#prepared.redactor.redact(describeError(error)));
        throw error;
      }
      if (!lease.providerLeaseId || lease.metadata?.expired === true) {
        this.#db.setState(row.id, "lost", "provider reports the lease expired");
        continue;
      }
      this.#recordLease(row.id, lease, owner);
      return { rowId: row.id, runId: row.runId, lease, reusable: true, resumed: true };
    }
  }

  /** Resumes a lease this process released (kept for reuse, or so it hopes); undefined when the provider says it is gone. */
  async resume(session: ProviderSession, tracked: TrackedLease): Promise<TrackedLease | undefined> {
    const owner = currentOwner();
    if (!tracked.lease.providerLeaseId) return undefined;
    // Ask the provider even when the row says released: whether it kept the lease is its call.
    this.#db.claimIdle(tracked.rowId, owner);
    let lease: PluginEnvironmentLease;
    try {
      lease = await session.resume(tracked.lease.providerLeaseId, tracked.lease.metadata);
    } catch (error) {
      this.#db.setState(tracked.rowId, "active", this.#prepared.redactor.redact(describeError(error)));
      throw error;
    }
    if (!lease.providerLeaseId || lease.metadata?.expired === true) {
      this.#db.setState(tracked.rowId, "lost", "provider reports the lease expired");
      return undefined;
    }
    this.#recordLease(tracked.rowId, lease, owner);
    return { ...tracked, lease, resumed: true };
  }

  /**
   * Releases a lease. A reusable lease released without cancellation is kept as `idle` for the next
   * `--reuse`; otherwise the row becomes `released`. On failure the row goes back to `active` (with
   * the error) so `leases gc` destroys it once this process is gone.
   */
  async release(session: ProviderSession, tracked: TrackedLease, options: { cancelActiveWork?: boolean; keep?: boolean } = {}): Promise<PluginEnvironmentTerminationReceipt | null> {
    this.#db.setState(tracked.rowId, "releasing");
    try {
      const receipt = await session.release(tracked.lease, options.cancelActiveWork ?? false);
      const keep = tracked.reusable && options.keep !== false && !options.cancelActiveWork;
      this.#db.setState(tracked.rowId, keep ? "idle" : "released");
      return receipt ?? null;
    } catch (error) {
      this.#db.setState(tracked.rowId, "active", this.#prepared.redactor.redact(describeError(error)));
      throw error;
    }
  }

  async destroy(session: ProviderSession, tracked: TrackedLease): Promise<PluginEnvironmentTerminationReceipt | null> {
    try {
      const receipt = await session.destroy(tracked.lease);
      this.#db.setState(tracked.rowId, "destroyed");
      return receipt ?? null;
    } catch (error) {
      this.#db.setState(tracked.rowId, "active", this.#prepared.redactor.redact(describeError(error)));
      throw error;
    }
  }
}
