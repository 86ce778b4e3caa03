export interface LeaseExpiryInput {
  /** The host's hard deadline (ISO 8601), when it has one. */
  requestedExpiresAt?: string | null;
  /** The provider's own lifetime for a lease; absent or null means unbounded. */
  defaultTtlMs?: number | null;
  now?: Date;
}

/** The provider-side expiry: the earlier of the default lifetime and the requested deadline, or none. */
export function resolveLeaseExpiry(input: LeaseExpiryInput): { expiresAt: Date | null } {
  const now = input.now ?? new Date();
  const candidates: number[] = [];
  if (input.defaultTtlMs != null) {
    if (!(input.defaultTtlMs > 0)) throw new Error(`defaultTtlMs must be positive, got ${input.defaultTtlMs}`);
    candidates.push(now.getTime() + input.defaultTtlMs);
  }
  if (input.requestedExpiresAt != null) {
    const requested = Date.parse(input.requestedExpiresAt);
    if (Number.isNaN(requested)) {
      throw new Error(`requestedExpiresAt is not a valid ISO 8601 timestamp: ${JSON.stringify(input.requestedExpiresAt)}`);
    }
    if (requested <= now.getTime()) {
      throw new Error(`requestedExpiresAt ${input.requestedExpiresAt} is not in the future (now ${now.toISOString()})`);
    }
    candidates.push(requested);
  }
  return { expiresAt: candidates.length === 0 ? null : new Date(Math.min(...candidates)) };
}
