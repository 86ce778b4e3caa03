/**
 * Name resolution for the host-side egress proxy. The worker env var
 * PAPERCLIP_BUBBLEWRAP_RESOLVE="name=ip,name2=ip2" pins names to addresses (like curl --resolve),
 * so tests and air-gapped operators can point a granted name at a local server.
 */
import dns from "node:dns/promises";
import { isIP } from "node:net";

export type Resolver = (host: string) => Promise<string[]>;

export const RESOLVE_ENV = "PAPERCLIP_BUBBLEWRAP_RESOLVE";

export function parseResolveOverrides(value: string | undefined): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const item of (value ?? "").split(",")) {
    const [rawName, rawIp] = item.split("=");
    const name = rawName?.trim().toLowerCase().replace(/\.$/, "");
    const ip = rawIp?.trim();
    if (!name || !ip || isIP(ip) === 0) continue;
    map.set(name, [...(map.get(name) ?? []), ip]);
  }
  return map;
}

/** Overrides first, then the system resolver (all addresses, as getaddrinfo orders them). */
export function createResolver(overrides: Map<string, string[]>): Resolver & { pinned(host: string): boolean } {
  const resolve = async (host: string) => {
    const pinned = overrides.get(host.toLowerCase());
    if (pinned) return pinned;
    const answers = await dns.lookup(host, { all: true, verbatim: true });
    return answers.map((answer) => answer.address);
  };
  return Object.assign(resolve, { pinned: (host: string) => overrides.has(host.toLowerCase()) });
}
