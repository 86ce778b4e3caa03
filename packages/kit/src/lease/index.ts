export { leaseFingerprint, canonicalJson } from "./fingerprint.js";
export type { LeaseFingerprintInput } from "./fingerprint.js";
export { REUSE_SENTINEL_PATH, buildSentinel, sentinelMatches } from "./sentinel.js";
export { leaseLabels, labelValue, LABEL_VALUE_MAX } from "./labels.js";
export type { LeaseLabels } from "./labels.js";
export { resolveLeaseExpiry } from "./expiry.js";
export type { LeaseExpiryInput } from "./expiry.js";
export { CreationCleanupError } from "./creation-cleanup-error.js";
export type { CreationCleanup } from "./creation-cleanup-error.js";
