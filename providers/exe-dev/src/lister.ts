import { defineLeaseLister } from "@paperclip-sandbox/kit";
import { createExeDevApi } from "./api.js";
import { apiKeyOf, exeDevConfig, normalizeApiUrl } from "./config.js";
import { EXE_DEV_DRIVER_KEY } from "./manifest.js";
import { labelsOf, tagOf } from "./vm-names.js";

/** For `paperclip-sandbox leases gc --provider exe-dev`: this provider's VMs, found at exe.dev by their tags. */
export const listLeases = defineLeaseLister(async (raw, { env, matchLabels, signal }) => {
  const config = exeDevConfig.parse(raw);
  const apiKey = apiKeyOf(config, env);
  if (!apiKey) throw new Error("exe.dev: no API token: set API token, or EXE_API_KEY");
  const api = createExeDevApi({ apiUrl: normalizeApiUrl(config.apiUrl), apiKey });
  const wanted: Record<string, string> = { ...matchLabels, "paperclip-provider": EXE_DEV_DRIVER_KEY };
  const filter = wanted["paperclip-environment"] ? tagOf("paperclip-environment", wanted["paperclip-environment"]) : tagOf("paperclip-provider", EXE_DEV_DRIVER_KEY);
  return (await api.list(filter, signal))
    .map((vm) => ({ providerLeaseId: vm.name, labels: labelsOf(vm.tags), state: vm.status }))
    .filter((lease) => Object.entries(wanted).every(([key, value]) => lease.labels[key] === value));
});
