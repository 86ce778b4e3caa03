import { DEFAULT_LABEL_POLICY, type LabelPolicy } from "./label-policy.js";
import { labelValue } from "./labels.js";

/** Who a resource must belong to before a hook may destroy (or reuse) it. */
export interface LeaseOwner {
  driverKey: string;
  companyId: string;
  environmentId: string;
}

export interface OwnershipMismatch {
  label: string;
  expected: string;
  /** null: the resource does not carry the label. */
  actual: string | null;
}

/** The resource is not this provider's, company's or environment's: the hook refuses to touch it. */
export class LeaseOwnershipError extends Error {
  override readonly name = "LeaseOwnershipError";
  readonly code = "lease_not_owned";
  readonly mismatches: readonly OwnershipMismatch[];

  constructor(resource: string, mismatches: OwnershipMismatch[]) {
    const what = mismatches.map((m) => (m.actual === null ? `${m.label} missing` : `${m.label} is "${m.actual}", expected "${m.expected}"`));
    super(`refusing to touch ${resource}: it does not belong to this provider, company and environment (${what.join("; ")})`);
    this.mismatches = mismatches;
  }
}

/** The owner's labels (provider, company, environment) as `leaseLabels` writes them. */
export function ownerLabels(owner: LeaseOwner, policy: LabelPolicy = DEFAULT_LABEL_POLICY): Readonly<Record<"paperclip-provider" | "paperclip-company" | "paperclip-environment", string>> {
  return {
    "paperclip-provider": labelValue(owner.driverKey, policy),
    "paperclip-company": labelValue(owner.companyId, policy),
    "paperclip-environment": labelValue(owner.environmentId, policy),
  };
}

/** The labels (provider, company, environment) that do not match `expected`, compared as `leaseLabels` wrote them. */
export function ownershipMismatches(labels: Readonly<Record<string, string | undefined>> | undefined, expected: LeaseOwner, policy: LabelPolicy = DEFAULT_LABEL_POLICY): OwnershipMismatch[] {
  const mismatches: OwnershipMismatch[] = [];
  for (const [label, value] of Object.entries(ownerLabels(expected, policy))) {
    const actual = labels?.[label] ?? null;
    if (actual !== value) mismatches.push({ label, expected: value, actual });
  }
  return mismatches;
}

/** Throws `LeaseOwnershipError` unless the resource's labels name this provider, company and environment. */
export function assertOwnedBy(labels: Readonly<Record<string, string | undefined>> | undefined, expected: LeaseOwner, options: { resource?: string; policy?: LabelPolicy } = {}): void {
  const mismatches = ownershipMismatches(labels, expected, options.policy);
  if (mismatches.length > 0) throw new LeaseOwnershipError(options.resource ?? "the resource", mismatches);
}
