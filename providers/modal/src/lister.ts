import { createSecretRedactor, defineLeaseLister } from "@paperclip-sandbox/kit";
import { createAccounts, loadModalSdk } from "./client.js";
import { credentialsOf, modalConfig } from "./config.js";
import { MODAL_DRIVER_KEY } from "./manifest.js";
import { sandboxesLabelled, TAGS } from "./sandboxes.js";

/**
 * For `paperclip-sandbox leases gc --provider modal`: the running sandboxes of the config's app
 * that carry the provider's label (and the caller's), each with its lease id, labels and expiry.
 * A lease kept by snapshot and released has no running sandbox, so it is not listed (it bills
 * nothing; its snapshot image expires with Modal's image TTL).
 */
export const listLeases = defineLeaseLister(async (raw, { env, matchLabels }) => {
  const config = modalConfig.parse(raw);
  const { credentials } = credentialsOf(config, env);
  const secrets = [config.tokenId, config.tokenSecret, credentials?.tokenId, credentials?.tokenSecret].filter((value): value is string => Boolean(value));
  const accounts = createAccounts({ loadSdk: loadModalSdk, env, logger: () => undefined });
  try {
    const account = await accounts.of(config, createSecretRedactor(secrets).redact, env);
    const found = await sandboxesLabelled(account, config, { ...matchLabels, "paperclip-provider": MODAL_DRIVER_KEY });
    return found.map(({ id, sandboxId, tags }) => {
      const expires = Number(tags[TAGS.expiresAt]);
      return {
        providerLeaseId: id,
        labels: tags,
        state: "running",
        metadata: { sandboxId },
        ...(Number.isFinite(expires) && expires > 0 ? { expiresAt: new Date(expires * 1000).toISOString() } : {}),
      };
    });
  } finally {
    accounts.closeAll();
  }
});
