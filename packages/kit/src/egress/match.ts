import { BlockList, isIP } from "node:net";
import { normalizeFqdn } from "./grant.js";

/** Exact names, or `*.example.com` for any name below example.com (not example.com itself). */
export function fqdnMatches(pattern: string, host: string): boolean {
  const name = normalizeFqdn(host);
  const rule = normalizeFqdn(pattern);
  if (!name || !rule) return false;
  if (rule.startsWith("*.")) return name.endsWith(rule.slice(1)) && name.length > rule.length - 1;
  return name === rule;
}

/** IPv4 or IPv6 containment; malformed input or mixed families never match. */
export function cidrContains(cidr: string, ip: string): boolean {
  const [network, prefixText, ...rest] = cidr.trim().split("/");
  const family = isIP(network ?? "");
  const address = ip.trim();
  if (rest.length > 0 || family === 0 || isIP(address) !== family) return false;
  const maxPrefix = family === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return false;
  const prefix = prefixText === undefined ? maxPrefix : Number(prefixText);
  if (prefix > maxPrefix) return false;
  const type = family === 4 ? "ipv4" : "ipv6";
  const list = new BlockList();
  list.addSubnet(network!, prefix, type);
  return list.check(address, type);
}
