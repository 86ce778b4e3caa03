import { EGRESS_GRANT_PATH, type EgressGrant } from "./grant.js";

const BLOCKED_NETWORK_PATTERNS = [
  /could not resolve host/i,
  /network is unreachable/i,
  /connection timed out/i,
  /failed to connect/i,
  /temporary failure in name resolution/i,
];

export function isBlockedNetworkError(stderr: string): boolean {
  return BLOCKED_NETWORK_PATTERNS.some((pattern) => pattern.test(stderr));
}

/** Adds one line telling the operator that the sandbox's network policy may be why the call failed. */
export function appendBlockedNetworkNote(stderr: string, grant: EgressGrant): string {
  if (!isBlockedNetworkError(stderr)) return stderr;
  const granted =
    grant.allowFqdns.length === 0 && grant.allowCidrs.length === 0
      ? "no grant is set for this task"
      : `current grant: allowFqdns=[${grant.allowFqdns.join(", ")}] allowCidrs=[${grant.allowCidrs.join(", ")}]`;
  const note = `[paperclip] this looks like a blocked network call: the sandbox network policy may have denied or could not route it; grant access in ${EGRESS_GRANT_PATH} (${granted}).`;
  const separator = stderr === "" || stderr.endsWith("\n") ? "" : "\n";
  return `${stderr}${separator}${note}\n`;
}
