import { defineLeaseLister } from "@paperclip-sandbox/kit";
import { BridgeClient } from "./bridge-client.js";
import { cloudflareConfig } from "./config.js";
import { CLOUDFLARE_DRIVER_KEY } from "./manifest.js";

/** For `paperclip-sandbox leases gc --provider cloudflare`: the bridge's sandboxes by label (this repository's bridge only). */
export const listLeases = defineLeaseLister(async (raw, { matchLabels }) => {
  const client = new BridgeClient(cloudflareConfig.parse(raw));
  if (!(await client.extensionsOf()).leaseLabels) {
    throw new Error("this bridge cannot list its sandboxes (a bridge from upstream's template keeps no labels): deploy the bridge from providers/cloudflare/bridge");
  }
  return (await client.list({ ...matchLabels, "paperclip-provider": CLOUDFLARE_DRIVER_KEY })).map((record) => ({
    providerLeaseId: record.providerLeaseId,
    labels: record.labels,
    createdAt: record.createdAt,
    state: "running",
  }));
});
