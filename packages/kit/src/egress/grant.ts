export interface EgressGrant {
  allowFqdns: string[];
  allowCidrs: string[];
}

/** Where the host writes a task's grant; named in user-facing notes. */
export const EGRESS_GRANT_PATH = "executionWorkspaceSettings.networkEgress";

/** Reads `settings.networkEgress` (the acquire's `executionWorkspaceSettings`); anything malformed yields no grant. */
export function normalizeEgressGrant(settings: unknown): EgressGrant {
  const egress = isRecord(settings) && isRecord(settings.networkEgress) ? settings.networkEgress : {};
  return {
    allowFqdns: cleanList(egress.allowFqdns, normalizeFqdn),
    allowCidrs: cleanList(egress.allowCidrs, (cidr) => cidr),
  };
}

export function mergeEgressGrants(...grants: EgressGrant[]): EgressGrant {
  return {
    allowFqdns: cleanList(
      grants.flatMap((g) => g.allowFqdns),
      normalizeFqdn,
    ),
    allowCidrs: cleanList(
      grants.flatMap((g) => g.allowCidrs),
      (cidr) => cidr,
    ),
  };
}

export function normalizeFqdn(name: string): string {
  const lower = name.trim().toLowerCase();
  return lower.endsWith(".") ? lower.slice(0, -1) : lower;
}

function cleanList(raw: unknown, normalize: (value: string) => string): string[] {
  if (!Array.isArray(raw)) return [];
  const seen = new Set<string>();
  for (const item of raw) {
    if (typeof item !== "string") continue;
    const value = normalize(item.trim());
    if (value) seen.add(value);
  }
  return [...seen];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
