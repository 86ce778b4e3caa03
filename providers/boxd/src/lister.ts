import { defineLeaseLister } from "@paperclip-sandbox/kit";
import { createBoxdApi } from "./api.js";
import { apiKeyOf, boxdConfig, MISSING_KEY } from "./config.js";
import { isGoneStatus } from "./machines.js";
import { BOXD_DRIVER_KEY } from "./manifest.js";
import { createTokenCache } from "./tokens.js";

/**
 * For `paperclip-sandbox leases gc --provider boxd`: the org's machines labelled
 * `paperclip-provider=boxd` (and the caller's labels), suspended and stopped ones included, each
 * with its labels, state and delete-timer deadline.
 */
export const listLeases = defineLeaseLister(async (raw, { env, matchLabels, signal }) => {
  const config = boxdConfig.parse(raw);
  const apiKey = apiKeyOf(config, env);
  if (!apiKey) throw new Error(MISSING_KEY);
  const api = createBoxdApi({ apiKey, apiUrl: config.apiUrl, exchangeUrl: config.exchangeUrl, tokens: createTokenCache() });
  try {
    const machines = await api.listMachines({ org: config.org, labels: { ...matchLabels, "paperclip-provider": BOXD_DRIVER_KEY } }, signal);
    return machines
      .filter((m) => !isGoneStatus(m.status))
      .map((m) => ({
        providerLeaseId: m.id,
        labels: m.labels,
        state: m.status,
        ...(m.createdAt ? { createdAt: m.createdAt.toISOString() } : {}),
        expiresAt: m.destroyAt ? m.destroyAt.toISOString() : null,
        metadata: { machineName: m.name },
      }));
  } finally {
    api.close();
  }
});
