import type { LeaseLabels } from "./labels.js";

export interface CreationCleanup {
  /** The provider resource that may exist and must be torn down. */
  providerLeaseId: string;
  companyId: string;
  environmentId: string;
  runId?: string;
  labels: LeaseLabels | Record<string, string>;
}

/**
 * Thrown when an acquire fails after a provider resource may already exist. Carries what the host
 * needs to destroy it. The cause is reduced to its message (pass `redact` to scrub it): the original
 * error object may hold credentials (request headers, URLs), so it is never kept or serialized.
 */
export class CreationCleanupError extends Error {
  readonly code = "CREATION_CLEANUP_REQUIRED";
  readonly cleanup: CreationCleanup;

  constructor(cleanup: CreationCleanup, cause: unknown, opts: { redact?: (text: string) => string } = {}) {
    const causeMessage = cause instanceof Error ? cause.message : String(cause);
    const reason = opts.redact ? opts.redact(causeMessage) : causeMessage;
    super(`sandbox creation failed after resource ${cleanup.providerLeaseId} was created; it needs cleanup: ${reason}`);
    this.name = "CreationCleanupError";
    this.cleanup = { ...cleanup, labels: { ...cleanup.labels } };
  }

  toJSON(): { name: string; code: string; message: string; cleanup: CreationCleanup } {
    return { name: this.name, code: this.code, message: this.message, cleanup: this.cleanup };
  }
}
