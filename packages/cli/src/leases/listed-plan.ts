import { labelValue } from "@paperclip-sandbox/kit";
import { TERMINAL_STATES, type LeaseRecord } from "../lease-db.js";
import type { OwnerStatus } from "../host-identity.js";
import type { GcDecision } from "./gc-plan.js";
import type { ListedLease } from "./provider-lister.js";

export interface ListedLeaseContext {
  driverKey: string;
  /** Listed through the kit's contract: the lease must carry this provider's label. */
  requireProviderLabel: boolean;
  /** Rows of the lease database with this provider lease id. */
  known: LeaseRecord[];
  /** The database pass already destroys it. */
  alreadyTargeted: boolean;
  now: Date;
  minAgeMs: number;
  yes: boolean;
  dryRun: boolean;
  /** The `paperclip-environment` label value of leases this machine's CLI creates. */
  ourEnvironment: string;
  /** The `paperclip-company` label value of leases the CLI creates. */
  ourCompany: string;
  statusOf: (row: LeaseRecord) => OwnerStatus;
}

/**
 * What `leases gc` does with one lease a provider listed. An orphan carries this provider's label
 * and either is not active in the lease database, or the provider reports it expired or its owner
 * gone. A lease in use by a running process here is never touched; a young one is kept (it may be
 * an acquire in flight); another machine's or the Paperclip host's needs `--yes`.
 * Undefined: the database pass already handles it.
 */
export function decideListedLease(lease: ListedLease, ctx: ListedLeaseContext): GcDecision | undefined {
  const providerLabel = lease.labels["paperclip-provider"];
  if (ctx.requireProviderLabel && providerLabel !== labelValue(ctx.driverKey)) {
    return { action: "keep", reason: providerLabel === undefined ? "has no paperclip-provider label" : `labelled for provider ${providerLabel}` };
  }
  if (ctx.alreadyTargeted) return undefined;
  const live = ctx.known.filter((row) => !TERMINAL_STATES.includes(row.state));
  const inUse = live.find((row) => ctx.statusOf(row) === "alive");
  if (inUse) return { action: "keep", reason: `in use by pid ${inUse.owner.pid} (lease database)` };
  if (lease.ownerAlive === true) return { action: "keep", reason: "a live worker holds it (the provider says)" };
  const ownerGone = lease.ownerAlive === false && live.length > 0;
  if (live.length > 0 && !lease.expired && !ownerGone) return { action: "keep", reason: `${live[0]!.state} in the lease database` };

  const facts: string[] = [];
  if (live.length > 0) facts.push(`${live[0]!.state} in the lease database`);
  else if (ctx.known.length > 0) facts.push(`recorded as ${ctx.known[0]!.state} but still present`);
  else facts.push("not in the lease database");
  if (lease.expired) facts.push("expired at the provider");
  else if (ownerGone) facts.push("its owner is gone (the provider says)");
  const what = facts.join("; ");

  const ageMs = lease.createdAt ? ctx.now.getTime() - Date.parse(lease.createdAt) : Number.POSITIVE_INFINITY;
  if (ageMs < ctx.minAgeMs && !lease.expired) return { action: "keep", reason: `${what}; younger than --min-age` };
  if (ctx.dryRun) return { action: "dry-run", reason: what };
  const company = lease.labels["paperclip-company"];
  const ours = lease.labels["paperclip-environment"] === ctx.ourEnvironment && (company === undefined || company === ctx.ourCompany);
  if (!ours && !ctx.yes) return { action: "dry-run", reason: `${what}; not created by this machine's CLI (use --yes)` };
  return { action: "destroy", reason: `${what}${ours ? "" : " (--yes)"}` };
}
