import type { EgressGrant } from "./grant.js";

/** The effective egress policy as environment variables for the sandboxed process. */
export function egressEnv(grant: EgressGrant, policy: string): Record<string, string> {
  return {
    PAPERCLIP_NETWORK_EGRESS_POLICY: policy,
    PAPERCLIP_NETWORK_EGRESS_ALLOW_FQDNS: grant.allowFqdns.join(","),
    PAPERCLIP_NETWORK_EGRESS_ALLOW_CIDRS: grant.allowCidrs.join(","),
  };
}
