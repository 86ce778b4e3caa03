import { ownedTemplateName, pollUntil, templateNameOwner, type TemplateDeclaration } from "@paperclip-sandbox/kit";
import type { BoxdApi } from "./api.js";
import type { BoxdConfig } from "./config.js";
import type { BoxdHandle } from "./machines.js";
import { BOXD_TEMPLATES } from "./manifest.js";

/** Polling a pending snapshot: from this pause, doubling, up to the cap. */
const POLL_FIRST_MS = 100;
const POLL_MAX_MS = 2_000;

/**
 * Custom images on boxd: a template is a boxd snapshot of the setup machine (`CreateSnapshot`,
 * polled with `GetSnapshot` until `ready`), runs start from it (`CreateVmFromSnapshot`, see
 * plugin.ts), and delete is `DeleteSnapshot`. Snapshots live in the key's org: another org's key
 * finds none.
 */
export function boxdTemplates(apiOf: (config: BoxdConfig) => BoxdApi): TemplateDeclaration<BoxdHandle, BoxdConfig> {
  return {
    ...BOXD_TEMPLATES,
    async capture(handle, ref, { labels, signal }) {
      const api = handle.api;
      const name = ownedTemplateName(labels);
      await api.createSnapshot(handle.machine.id, name, signal);
      try {
        const snapshot = await pollUntil(
          () => api.getSnapshot(name, ref.config.org, signal),
          (seen) => !seen || seen.status === "ready" || seen.status === "failed",
          { what: `boxd snapshot ${name} to be saved`, intervalMs: POLL_FIRST_MS, maxIntervalMs: POLL_MAX_MS, signal },
        );
        if (!snapshot) throw new Error(`boxd: snapshot ${name} disappeared while it was being saved`);
        if (snapshot.status === "failed") throw new Error(`boxd: saving snapshot ${name} of machine ${handle.machine.id} failed`);
        return {
          templateRef: name,
          metadata: {
            version: snapshot.version,
            sizeBytes: snapshot.sizeBytes,
            vcpu: snapshot.vcpu,
          },
        };
      } catch (error) {
        // Never a half-made template the host does not know about.
        await api.deleteSnapshot(name, ref.config.org).catch(() => undefined);
        throw error;
      }
    },
    async labels(templateRef, config, expected) {
      const snapshot = await apiOf(config).getSnapshot(templateRef, config.org);
      if (!snapshot || snapshot.status === "failed") return null;
      // boxd keeps no labels on a snapshot (its request has a machine and a name only): the owner is
      // in the name (the kit's digest form). Any other name is an operator's snapshot: no owner.
      return templateNameOwner(templateRef, expected) ?? {};
    },
    async delete(templateRef, config) {
      await apiOf(config).deleteSnapshot(templateRef, config.org);
    },
  };
}
