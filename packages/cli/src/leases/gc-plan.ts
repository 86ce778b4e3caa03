import type { LeaseRecord } from "../lease-db.js";
import { ownerStatus, type OwnerStatus } from "../host-identity.js";

export type GcDecision = { action: "destroy"; reason: string } | { action: "dry-run"; reason: string } | { action: "keep"; reason: string };

export interface GcPolicy {
  now: Date;
  here: { hostId: string; bootId: string | undefined };
  /** `--yes`: act on leases created by other machines too. */
  yes: boolean;
  /** `--dry-run`: act on nothing. */
  dryRun: boolean;
  /** `--include-idle`: destroy idle (kept-for-reuse) leases even before they expire. */
  includeIdle: boolean;
  /** Injected for tests. */
  statusOf?: (lease: LeaseRecord) => OwnerStatus;
}

function isExpired(lease: LeaseRecord, now: Date): boolean {
  return lease.expiresAt !== null && Date.parse(lease.expiresAt) <= now.getTime();
}

/**
 * What `leases gc` does with one recorded lease:
 * - owner process still running here → keep (it is in use);
 * - owner gone (crashed, killed, rebooted) or the lease expired → destroy;
 * - idle reusable lease → keep until it expires, unless `--include-idle`;
 * - created by another machine → only expired ones, and only with `--yes` (dry-run otherwise).
 */
export function decideGc(lease: LeaseRecord, policy: GcPolicy): GcDecision {
  const status = (policy.statusOf ?? ((l: LeaseRecord) => ownerStatus(l.owner, policy.here)))(lease);
  const expired = isExpired(lease, policy.now);
  const foreign = lease.owner.hostId !== policy.here.hostId;
  let reason: string | undefined;
  if (lease.state === "idle") {
    if (expired) reason = "idle lease expired";
    else if (policy.includeIdle) reason = "idle lease (--include-idle)";
    else return { action: "keep", reason: "idle, kept for reuse until it expires" };
  } else if (status === "alive") {
    return { action: "keep", reason: `in use by pid ${lease.owner.pid}` };
  } else if (status === "gone") {
    reason = `owner pid ${lease.owner.pid} is gone (state ${lease.state})`;
  } else if (expired) {
    reason = "expired";
  } else {
    return { action: "keep", reason: "created by another machine and not expired" };
  }
  if (policy.dryRun) return { action: "dry-run", reason };
  if (foreign && !policy.yes) return { action: "dry-run", reason: `${reason}; created by another machine (use --yes)` };
  return { action: "destroy", reason };
}
