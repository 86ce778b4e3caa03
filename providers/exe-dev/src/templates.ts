import { createIdempotently, ownedTemplateName, templateNameOwner, type TemplateDeclaration } from "@paperclip-sandbox/kit";
import { copyOwnVm, waitUntilUnlisted, type ExeDevApi } from "./api.js";
import type { ExeDevConfig } from "./config.js";
import { EXE_DEV_TEMPLATES } from "./manifest.js";
import type { ExeDevHandle } from "./plugin.js";
import { isVmName } from "./vm-names.js";

/**
 * Custom images on exe.dev, which has no snapshots: a template is a VM, `cp` of the setup VM (its
 * disk) to the kit's owner-digest name, with no tags (`--copy-tags=false`: it is no lease, so no
 * lease listing or `leases gc` finds it). exe.dev has no stop: the template VM runs, and costs, until
 * it is deleted. Runs start as `cp` of it (plugin.ts); delete is `rm`. VMs live in the token's
 * account: another account lists no such VM.
 */
export function exeDevTemplates(apiFor: (config: ExeDevConfig) => ExeDevApi): TemplateDeclaration<ExeDevHandle, ExeDevConfig> {
  return {
    ...EXE_DEV_TEMPLATES,
    async capture(handle, ref, { labels, signal }) {
      const api = apiFor(ref.config);
      const name = templateNameFor(labels);
      const started = Date.now();
      try {
        // Only this capture uses the name: a lost answer is looked for, never copied twice.
        await createIdempotently({
          create: () => copyOwnVm(api, { source: handle.providerLeaseId, name }, signal),
          find: () => api.find(name, signal),
          signal,
        });
      } catch (error) {
        // Never a half-made template the host does not know about.
        await api.remove(name).catch(() => undefined);
        throw error;
      }
      return { templateRef: name, metadata: { sourceVm: handle.providerLeaseId, copyMs: Date.now() - started } };
    },
    async labels(templateRef, config, expected) {
      if (!isVmName(templateRef) || !(await apiFor(config).find(templateRef))) return null;
      // exe.dev keeps the template's owner in its name only (the kit's digest form).
      return templateNameOwner(templateRef, expected);
    },
    async delete(templateRef, config) {
      const api = apiFor(config);
      await api.remove(templateRef);
      await waitUntilUnlisted(api, templateRef);
    },
  };
}

/** An owner-digest name that is also a VM name: exe.dev refuses names ending in `-<digits>`, which the random part may be. */
function templateNameFor(labels: Readonly<Record<string, string>>): string {
  for (;;) {
    const name = ownedTemplateName(labels);
    if (isVmName(name)) return name;
  }
}
