export { normalizeEgressGrant, mergeEgressGrants, normalizeFqdn, EGRESS_GRANT_PATH } from "./grant.js";
export type { EgressGrant } from "./grant.js";
export { fqdnMatches, cidrContains } from "./match.js";
export { isBlockedNetworkError, appendBlockedNetworkNote, type BlockedNetworkNoteOptions } from "./blocked-network.js";
export { egressEnv } from "./env.js";
