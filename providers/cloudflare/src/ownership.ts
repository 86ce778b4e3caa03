import { encodeLeaseName, labelValue, leaseNameHash, parseLeaseName } from "@paperclip-sandbox/kit";

/**
 * Ownership a bridge without labels can still prove: the bridge names a sandbox
 * `pc-<runId>-<8 hex>` from the acquire's `runId`, so the plugin sends as `runId` a lease name
 * (`encodeLeaseName`: hashes of provider, company, environment and run) and reads the owner back
 * from the sandbox id. Nothing in the sandbox (which its own code could rewrite) is trusted.
 */
const NAME_PREFIX = "pc";
const SANDBOX_ID = /^pc-(.+)-[0-9a-f]{8}$/;

export interface Owner {
  driverKey: string;
  companyId: string;
  environmentId: string;
}

/** The `runId` to send to the bridge: a lease name naming the owner and the run. */
export function ownedRunId(owner: Owner & { runId: string }): string {
  return encodeLeaseName(owner, { prefix: NAME_PREFIX });
}

/**
 * The owner labels the sandbox id proves for `owner` (provider, company, environment, as `create`
 * gave them), or none when the id was not made for that owner (or not through `ownedRunId`).
 */
export function labelsProvenById(providerLeaseId: string, owner: Owner): Record<string, string> {
  const parts = parseLeaseName(SANDBOX_ID.exec(providerLeaseId)?.[1] ?? "", { prefix: NAME_PREFIX });
  if (!parts) return {};
  const same =
    parts.provider === leaseNameHash("provider", owner.driverKey) &&
    parts.company === leaseNameHash("company", owner.companyId) &&
    parts.environment === leaseNameHash("environment", owner.environmentId);
  if (!same) return {};
  return { "paperclip-provider": labelValue(owner.driverKey), "paperclip-company": labelValue(owner.companyId), "paperclip-environment": labelValue(owner.environmentId) };
}
