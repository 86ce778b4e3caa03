import { defineLeaseLister } from "@paperclip-sandbox/kit";
import { leaseIds, listSandboxes } from "./vendor.mjs";

export { default as manifest } from "./manifest.mjs";

/** The kit's lister contract: the vendor's sandboxes, by label, as leases. */
export const listLeases = defineLeaseLister(async (config, ctx) => {
  const sandboxes = await listSandboxes(config, ctx.matchLabels, ctx.signal);
  return sandboxes
    .filter((s) => leaseIds.is(`hf-${s.id}`))
    .map((s) => ({ providerLeaseId: leaseIds.encode(s.id), labels: s.labels, createdAt: s.createdAt, expiresAt: s.expiresAt ?? null, state: s.state }));
});
