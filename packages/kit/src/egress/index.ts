export { normalizeEgressGrant, mergeEgressGrants, normalizeFqdn, EGRESS_GRANT_PATH } from "./grant.js";
export type { EgressGrant } from "./grant.js";
export { fqdnMatches, cidrContains } from "./match.js";
export {
  parseIp,
  canonicalIp,
  canonicalIpText,
  formatIp,
  parseCidr,
  formatCidr,
  cidrHas,
  cidrWithin,
  cidrAdmits,
  embeddedIpv4,
  hostLocalRanges,
  describeHostLocal,
  hostInterfaceAddresses,
  cachedHostAddresses,
  type IpAddress,
  type IpCidr,
  type EmbeddingForm,
  type HostLocalKind,
  type HostLocalRange,
} from "./address.js";
export { isBlockedNetworkError, appendBlockedNetworkNote, type BlockedNetworkNoteOptions } from "./blocked-network.js";
export { egressEnv } from "./env.js";
