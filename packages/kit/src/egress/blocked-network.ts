import { EGRESS_GRANT_PATH, type EgressGrant } from "./grant.js";

const BLOCKED_NETWORK_PATTERNS = [
  /could not resolve host/i,
  /network is unreachable/i,
  /connection timed out/i,
  /failed to connect/i,
  /temporary failure in name resolution/i,
  // An egress proxy refusing the destination: curl...
  /CONNECT tunnel failed, response 403/i,
  /Received HTTP code 403 from proxy after CONNECT/i,
  // ...and node (tunnel-agent / global-agent style agents, undici's ProxyAgent).
  /tunneling socket could not be established/i,
  /Proxy response \(403\)/i,
];

export function isBlockedNetworkError(stderr: string): boolean {
  return BLOCKED_NETWORK_PATTERNS.some((pattern) => pattern.test(stderr));
}

export interface BlockedNetworkNoteOptions {
  /**
   * What the provider itself knows was refused (e.g. its egress proxy's last denial, naming the
   * destination and the reason). When set, the note is appended whatever stderr says, and this
   * text replaces the generic "looks like a blocked network call" wording.
   */
  cause?: string | undefined;
}

/** Adds one line telling the operator that the sandbox's network policy may be why the call failed. */
export function appendBlockedNetworkNote(stderr: string, grant: EgressGrant, options: BlockedNetworkNoteOptions = {}): string {
  const cause = options.cause?.replace(/[\r\n]+/g, " ").trim();
  if ((cause === undefined || cause === "") && !isBlockedNetworkError(stderr)) return stderr;
  const granted =
    grant.allowFqdns.length === 0 && grant.allowCidrs.length === 0
      ? "no grant is set for this task"
      : `current grant: allowFqdns=[${grant.allowFqdns.join(", ")}] allowCidrs=[${grant.allowCidrs.join(", ")}]`;
  const note =
    cause === undefined || cause === ""
      ? `[paperclip] this looks like a blocked network call: the sandbox network policy may have denied or could not route it; grant access in ${EGRESS_GRANT_PATH} (${granted}).`
      : `[paperclip] ${cause}; grant access in ${EGRESS_GRANT_PATH} (${granted}).`;
  const separator = stderr === "" || stderr.endsWith("\n") ? "" : "\n";
  return `${stderr}${separator}${note}\n`;
}
