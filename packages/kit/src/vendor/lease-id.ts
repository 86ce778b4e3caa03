const MAX_LEASE_ID_LENGTH = 256;

/** A `providerLeaseId` that does not follow the provider's rule; it was not sent to the vendor. */
export class LeaseIdError extends Error {
  override readonly name = "LeaseIdError";
  readonly code = "invalid_lease_id";
  readonly field = "providerLeaseId";
  /** The rule, in words. */
  readonly rule: string;

  constructor(message: string, rule: string) {
    super(message);
    this.rule = rule;
  }
}

export interface LeaseIdCodecSpec<Ref> {
  /** For messages: "kubernetes". */
  vendor: string;
  /** Put in front of every id and required on decode (`k8s-`), so ids of two providers never mix. */
  prefix?: string;
  /** What the part after the prefix must match, whole (anchoring is added). */
  pattern: RegExp;
  /** The rule in words, for errors (default: the pattern). */
  rule?: string;
  /** Vendor reference → the part after the prefix. */
  encode(ref: Ref): string;
  /** The part after the prefix (already matched) → vendor reference. `match` holds the pattern's groups. */
  decode(body: string, match: RegExpExecArray): Ref;
}

export interface LeaseIdCodec<Ref> {
  readonly vendor: string;
  readonly prefix: string;
  readonly rule: string;
  /** The lease id for a vendor reference; throws `LeaseIdError` if the vendor's id does not fit the rule. */
  encode(ref: Ref): string;
  /** The vendor reference in a lease id from the host; throws `LeaseIdError` naming the rule. */
  decode(leaseId: unknown): Ref;
  /** Whether `leaseId` follows the rule (no throw). */
  is(leaseId: unknown): leaseId is string;
  /** The vendor reference, or undefined for an id that does not follow the rule (a lease that cannot be ours; no throw). */
  tryDecode(leaseId: unknown): Ref | undefined;
}

/**
 * A vendor-id ↔ `providerLeaseId` codec with validation: every id from the host is checked
 * against one rule before any part of it reaches a vendor URL or RPC.
 */
export function defineLeaseIdCodec<Ref>(spec: LeaseIdCodecSpec<Ref>): LeaseIdCodec<Ref> {
  const prefix = spec.prefix ?? "";
  const flags = spec.pattern.flags.replace(/[gy]/g, ""); // stateful flags would make exec() skip matches
  const whole = new RegExp(`^(?:${spec.pattern.source})$`, flags);
  const rule = `${prefix ? `"${prefix}" followed by ` : ""}${spec.rule ?? `/${spec.pattern.source}/`}`;
  const refuse = (what: string) => new LeaseIdError(`${spec.vendor} providerLeaseId: ${what}; expected ${rule}`, rule);

  const match = (leaseId: unknown): RegExpExecArray | string => {
    if (typeof leaseId !== "string") return `expected a string, got ${leaseId === null ? "null" : typeof leaseId}`;
    if (leaseId.length === 0) return "empty";
    if (leaseId.length > MAX_LEASE_ID_LENGTH) return `longer than ${MAX_LEASE_ID_LENGTH} characters`;
    if (/[\u0000-\u001f\u007f]/.test(leaseId)) return "contains control characters";
    if (!leaseId.startsWith(prefix)) return `${show(leaseId)} does not start with "${prefix}"`;
    const found = whole.exec(leaseId.slice(prefix.length));
    return found ?? `${show(leaseId)} does not follow the rule`;
  };

  return {
    vendor: spec.vendor,
    prefix,
    rule,
    encode(ref) {
      const leaseId = prefix + spec.encode(ref);
      const found = match(leaseId);
      if (typeof found === "string") throw new LeaseIdError(`${spec.vendor} returned an id that cannot be a providerLeaseId (${found}); expected ${rule}`, rule);
      return leaseId;
    },
    decode(leaseId) {
      const found = match(leaseId);
      if (typeof found === "string") throw refuse(found);
      return spec.decode(found[0], found);
    },
    is(leaseId): leaseId is string {
      return typeof match(leaseId) !== "string";
    },
    tryDecode(leaseId) {
      const found = match(leaseId);
      return typeof found === "string" ? undefined : spec.decode(found[0], found);
    },
  };
}

/** The common case: the lease id is the vendor's one opaque id (default rule: 1–128 of `[A-Za-z0-9_-]`). */
export function opaqueLeaseIdCodec(spec: { vendor: string; prefix?: string; pattern?: RegExp; rule?: string }): LeaseIdCodec<string> {
  const pattern = spec.pattern ?? /[A-Za-z0-9_-]{1,128}/;
  return defineLeaseIdCodec<string>({
    vendor: spec.vendor,
    prefix: spec.prefix,
    pattern,
    rule: spec.rule ?? (spec.pattern ? undefined : "1 to 128 of A-Z a-z 0-9 _ -"),
    encode: (id) => id,
    decode: (body) => body,
  });
}

function show(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
}
