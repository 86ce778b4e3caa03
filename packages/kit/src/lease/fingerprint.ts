import { createHash } from "node:crypto";

export interface LeaseFingerprintInput {
  companyId: string;
  environmentId: string;
  agentId?: string | null;
  executionWorkspaceId?: string | null;
  adapterType?: string | null;
  /** Provider fields that shape the sandbox (image, size, ...): a change means a different sandbox. */
  resource?: Record<string, unknown>;
}

/** sha256 (hex) over canonical JSON, so key order and absent-vs-undefined never change the value. */
export function leaseFingerprint(input: LeaseFingerprintInput): string {
  const identity = {
    companyId: input.companyId,
    environmentId: input.environmentId,
    agentId: input.agentId ?? null,
    executionWorkspaceId: input.executionWorkspaceId ?? null,
    adapterType: input.adapterType ?? null,
    resource: input.resource ?? {},
  };
  return createHash("sha256").update(canonicalJson(identity)).digest("hex");
}

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const child = (value as Record<string, unknown>)[key];
    if (child !== undefined) sorted[key] = sortKeys(child);
  }
  return sorted;
}
