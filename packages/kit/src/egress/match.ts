import { canonicalIp, cidrHas, parseCidr, parseIp } from "./address.js";
import { normalizeFqdn } from "./grant.js";

/** Exact names, or `*.example.com` for any name below example.com (not example.com itself). */
export function fqdnMatches(pattern: string, host: string): boolean {
  const name = normalizeFqdn(host);
  const rule = normalizeFqdn(pattern);
  if (!name || !rule) return false;
  if (rule.startsWith("*.")) return name.endsWith(rule.slice(1)) && name.length > rule.length - 1;
  return name === rule;
}

/**
 * IPv4 or IPv6 containment, both sides in canonical form (an IPv4-mapped address or CIDR is the
 * IPv4 one it spells); malformed input or mixed families never match. Containment only: whether a
 * grant admits a host-local address is `cidrAdmits`.
 */
export function cidrContains(cidr: string, ip: string): boolean {
  const range = parseCidr(cidr);
  const address = parseIp(ip);
  return range !== null && address !== null && cidrHas(range, canonicalIp(address));
}
