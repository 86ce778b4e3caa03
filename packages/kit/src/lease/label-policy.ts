/** A vendor's rules for label (tag, metadata) keys and values. */
export interface LabelPolicy {
  maxKeyLength: number;
  maxValueLength: number;
  /** One allowed character, as a character class (`/[a-z0-9._-]/`); others become `replacement`. */
  allowed: RegExp;
  /** What a disallowed character becomes; it must be allowed itself. */
  replacement: string;
  /** "lower" folds to lowercase first (for vendors that reject or fold capitals). */
  case: "lower" | "preserve";
  /** First and last characters must be letters or digits (Kubernetes). */
  alphanumericEnds: boolean;
}

/** Kubernetes label values, lowercased: they fit every vendor the project targets. */
export const DEFAULT_LABEL_POLICY: LabelPolicy = Object.freeze({
  maxKeyLength: 63,
  maxValueLength: 63,
  allowed: /[a-z0-9._-]/,
  replacement: "-",
  case: "lower",
  alphanumericEnds: true,
});

/** The label keys the kit writes; a policy must accept them unchanged. */
export const LEASE_LABEL_KEYS = ["paperclip-provider", "paperclip-company", "paperclip-environment", "paperclip-run"] as const;

/**
 * A policy from the default and a vendor's overrides, checked: its replacement and the hash
 * suffix (hex digits) must be allowed, and the kit's label keys must pass unchanged.
 */
export function defineLabelPolicy(overrides: Partial<LabelPolicy>): LabelPolicy {
  const policy: LabelPolicy = { ...DEFAULT_LABEL_POLICY, ...overrides };
  const allowed = new RegExp(`^(?:${policy.allowed.source})$`, policy.allowed.flags.replace(/[gy]/g, ""));
  const fail = (rule: string) => new TypeError(`labelPolicy: ${rule}`);
  for (const field of ["maxKeyLength", "maxValueLength"] as const) {
    if (!Number.isInteger(policy[field]) || policy[field] < 16) throw fail(`${field} must be an integer of at least 16 (a value keeps room for its hash), got ${policy[field]}`);
  }
  if (policy.replacement.length !== 1 || !allowed.test(policy.replacement)) throw fail(`replacement ${JSON.stringify(policy.replacement)} must be one allowed character`);
  if (![..."0123456789abcdef"].every((c) => allowed.test(c))) throw fail("allowed must include 0-9 and a-f (long values end in a hash)");
  for (const key of LEASE_LABEL_KEYS) {
    if (key.length > policy.maxKeyLength || ![...key].every((c) => allowed.test(c))) throw fail(`the label key ${key} must be allowed as it is (use name encoding for this vendor instead)`);
  }
  return Object.freeze({ ...policy, allowed });
}
