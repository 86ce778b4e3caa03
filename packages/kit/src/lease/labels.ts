import { createHash } from "node:crypto";
import { DEFAULT_LABEL_POLICY, type LabelPolicy } from "./label-policy.js";

export const LABEL_VALUE_MAX = 63;
/** A value cut to fit ends in this many hex digits of its hash, so two long ids never share a label. */
const HASH_SUFFIX_LENGTH = 8;

// A type alias, not an interface, so it is assignable to Record<string, string | undefined>.
export type LeaseLabels = {
  "paperclip-provider": string;
  "paperclip-company": string;
  "paperclip-environment": string;
  "paperclip-run": string;
};

export interface LeaseLabelInput {
  driverKey: string;
  companyId: string;
  environmentId: string;
  runId: string;
}

/** Labels that let a provider (or an operator) find a run's resources, and check ownership before destroying one. */
export function leaseLabels(input: LeaseLabelInput, policy: LabelPolicy = DEFAULT_LABEL_POLICY): LeaseLabels {
  return {
    "paperclip-provider": labelValue(input.driverKey, policy),
    "paperclip-company": labelValue(input.companyId, policy),
    "paperclip-environment": labelValue(input.environmentId, policy),
    "paperclip-run": labelValue(input.runId, policy),
  };
}

/**
 * A label value under `policy` (default: lowercase, `[a-z0-9-_.]` only, at most 63 characters,
 * starting and ending alphanumeric). A value that is too long keeps its start and ends in a hash
 * of the whole, so it stays unique.
 */
export function labelValue(raw: string, policy: LabelPolicy = DEFAULT_LABEL_POLICY): string {
  const allowed = new RegExp(`^(?:${policy.allowed.source})$`, policy.allowed.flags.replace(/[gy]/g, ""));
  const folded = policy.case === "lower" ? raw.toLowerCase() : raw;
  let value = [...folded].map((c) => (allowed.test(c) ? c : policy.replacement)).join("");
  value = trimEnds(value, policy);
  if (value.length > policy.maxValueLength) {
    const hash = createHash("sha256").update(raw).digest("hex").slice(0, HASH_SUFFIX_LENGTH);
    const head = trimEnds(value.slice(0, policy.maxValueLength - HASH_SUFFIX_LENGTH - 1), policy);
    value = `${head}${policy.replacement}${hash}`;
  }
  return value;
}

function trimEnds(value: string, policy: LabelPolicy): string {
  return policy.alphanumericEnds ? value.replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "") : value;
}
