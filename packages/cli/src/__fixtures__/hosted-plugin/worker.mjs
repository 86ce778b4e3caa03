import { definePlugin, runWorker } from "@paperclipai/plugin-sdk";
import { createSandbox, destroySandbox, parseConfig } from "./vendor.mjs";

const plugin = definePlugin({
  async setup() {},
  async onEnvironmentValidateConfig({ config }) {
    const errors = parseConfig(config);
    return errors.length ? { ok: false, errors } : { ok: true, normalizedConfig: config };
  },
  async onEnvironmentProbe() {
    return { ok: true, summary: "hosted fixture" };
  },
  async onEnvironmentAcquireLease(params) {
    return { providerLeaseId: await createSandbox(params.config, params), metadata: {} };
  },
  async onEnvironmentResumeLease() {
    return { providerLeaseId: null, metadata: { expired: true } };
  },
  async onEnvironmentReleaseLease(params) {
    if (!params.providerLeaseId) return undefined;
    await destroySandbox(params.config, params);
    return { providerLeaseId: params.providerLeaseId, state: "destroyed" };
  },
  async onEnvironmentDestroyLease(params) {
    if (!params.providerLeaseId) return undefined;
    await destroySandbox(params.config, params);
    return { providerLeaseId: params.providerLeaseId, state: "destroyed" };
  },
});

export default plugin;
runWorker(plugin, import.meta.url);
