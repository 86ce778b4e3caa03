/**
 * Bubblewrap leases as sandboxes of the backend: the lease id format, the default state directory,
 * and the listing/reaping the CLI's leak clean-up (`leases gc`) calls. A lease's provider-specific
 * fields live in the sandbox's metadata (LEASE_METADATA keys).
 */
import os from "node:os";
import path from "node:path";
import { createSandboxBackend, newSandboxId, type SandboxSummary } from "@paperclip-sandbox/sandbox-backend";
import { defineLeaseIdCodec, type EgressGrant } from "@paperclip-sandbox/kit";

const LEASE_ID_PREFIX = "bwrap-";
const leaseIds = defineLeaseIdCodec<string>({ vendor: "bubblewrap", prefix: LEASE_ID_PREFIX, pattern: /[a-z0-9]{16}/, encode: (id) => id, decode: (body) => body });

export function newLeaseId(): string {
  return newSandboxId(LEASE_ID_PREFIX);
}

export const isLeaseId = (value: unknown): value is string => leaseIds.is(value);

/**
 * Default state directory: $XDG_STATE_HOME/paperclip-bubblewrap when set, else a per-uid directory
 * under /var/tmp (persistent across reboots of tmpfs /tmp, and writable by root and non-root users).
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, "paperclip-bubblewrap");
  return path.join("/var/tmp", `paperclip-bubblewrap-${os.userInfo().uid}`);
}

/** What the plugin keeps in a lease's sandbox metadata. */
interface LeaseMetadata {
  /** Kit leaseFingerprint of the acquire (identity + sandbox shape); also in the reuse sentinel. */
  fingerprint: string | null;
  /** Fingerprint of company, environment and sandbox shape only: recomputable from resume params. */
  shapeFingerprint: string;
  reuse: boolean;
  grant: EgressGrant;
  /** The acquire's requestedExpiresAt. */
  requestedExpiresAt: string | null;
}

function leaseMetadataOf(metadata: Readonly<Record<string, unknown>>): LeaseMetadata {
  const grant = (metadata.grant ?? {}) as Partial<EgressGrant>;
  return {
    fingerprint: typeof metadata.fingerprint === "string" ? metadata.fingerprint : null,
    shapeFingerprint: typeof metadata.shapeFingerprint === "string" ? metadata.shapeFingerprint : "",
    reuse: metadata.reuse === true,
    grant: { allowFqdns: grant.allowFqdns ?? [], allowCidrs: grant.allowCidrs ?? [] },
    requestedExpiresAt: typeof metadata.requestedExpiresAt === "string" ? metadata.requestedExpiresAt : null,
  };
}

/** A lease as the CLI's leak clean-up sees it (the shape of the former lease.json). */
export interface LeaseRecord extends LeaseMetadata {
  leaseId: string;
  state: "running" | "stopped" | "frozen";
  createdAt: string;
  expiresAt: string;
  labels: Record<string, string>;
}

export interface LeaseSummary {
  leaseId: string;
  dir: string;
  record: LeaseRecord | null;
  /** The worker that last adopted the lease is still running. */
  ownerAlive: boolean;
  /** The jail's namespace init is still running. */
  jailAlive: boolean;
  expired: boolean;
}

function leaseSummary(stateDir: string, sandbox: SandboxSummary, now: number): LeaseSummary {
  const record: LeaseRecord | null =
    sandbox.state === "incomplete"
      ? null
      : {
          leaseId: sandbox.id,
          state: sandbox.state,
          createdAt: new Date(sandbox.createdAt!).toISOString(),
          expiresAt: new Date(sandbox.expiresAt!).toISOString(),
          labels: sandbox.labels,
          ...leaseMetadataOf(sandbox.metadata),
        };
  return {
    leaseId: sandbox.id,
    dir: path.join(stateDir, "leases", sandbox.id),
    record,
    ownerAlive: sandbox.ownerAlive,
    jailAlive: sandbox.alive,
    expired: record ? Date.parse(record.expiresAt) <= now : sandbox.expired,
  };
}

/** Every lease directory in a state dir, with liveness. */
export async function listLeaseDirectories(stateDir: string = defaultStateDir(), now = Date.now()): Promise<LeaseSummary[]> {
  const backend = createSandboxBackend({ stateDir });
  try {
    return (await backend.list()).filter((sandbox) => isLeaseId(sandbox.id)).map((sandbox) => leaseSummary(stateDir, sandbox, now));
  } finally {
    await backend.close();
  }
}

/**
 * Leases the CLI's leak clean-up should reap: the owner worker is gone and the lease is expired (or
 * its record is unreadable, i.e. an acquire died half-way).
 */
export async function findOrphans(stateDir: string = defaultStateDir(), now = Date.now()): Promise<LeaseSummary[]> {
  return (await listLeaseDirectories(stateDir, now)).filter((lease) => !lease.ownerAlive && lease.expired);
}

/** Ends a lease's jail (confirmed), removes its cgroups and deletes its directory; safe for a half-gone lease. */
export async function reapLease(leaseId: string, stateDir: string = defaultStateDir()): Promise<void> {
  if (!isLeaseId(leaseId)) throw new Error(`not a bubblewrap lease id: ${String(leaseId).slice(0, 80)}`);
  const backend = createSandboxBackend({ stateDir });
  try {
    await backend.destroy(leaseId);
  } finally {
    await backend.close();
  }
}
