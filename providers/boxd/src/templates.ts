import { ownedTemplateName, templateNameOwner, type TemplateDeclaration } from "@paperclip-sandbox/kit";
import type { BoxdApi } from "./api.js";
import type { BoxdConfig } from "./config.js";
import type { BoxdHandle } from "./machines.js";
import { BOXD_TEMPLATES } from "./manifest.js";

/** Polling a pending snapshot: from this pause, doubling, up to the cap. */
const POLL_FIRST_MS = 100;
const POLL_MAX_MS = 2_000;

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", abort, { once: true });
  });
}

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
        for (let pause = POLL_FIRST_MS; ; pause = Math.min(pause * 2, POLL_MAX_MS)) {
          const snapshot = await api.getSnapshot(name, ref.config.org, signal);
          if (!snapshot) throw new Error(`boxd: snapshot ${name} disappeared while it was being saved`);
          if (snapshot.status === "ready") {
            return {
              templateRef: name,
              metadata: {
                version: snapshot.version,
                sizeBytes: snapshot.sizeBytes,
                vcpu: snapshot.vcpu,
              },
            };
          }
          if (snapshot.status === "failed") throw new Error(`boxd: saving snapshot ${name} of machine ${handle.machine.id} failed`);
          await sleep(pause, signal);
        }
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
