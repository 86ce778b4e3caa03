import { defineLeaseLister, type ListedProviderLease } from "@paperclip-sandbox/kit";
import { kubernetesConfig } from "./config.js";
import { createClientPool } from "./kube.js";
import { listWorkloads } from "./lister.js";

export { createKubernetesPlugin, createKubernetesProvider, RUN_ID_LABEL, type KubernetesPluginDeps, type KubernetesHandle } from "./plugin.js";
export { kubernetesConfig, kubernetesConfigSchema, crossFieldProblems, type KubernetesConfig } from "./config.js";
export { default as manifest, KUBERNETES_DRIVER_KEY, KUBERNETES_PLUGIN_ID, KUBERNETES_SHAPE } from "./manifest.js";
export { leaseIds, tenantNamespace, shortenName, ulid } from "./names.js";
export { NON_PUBLIC_IPV4, runCiliumPolicy, runNetworkPolicy, standardEgressRules, egressPolicyName } from "./egress.js";
export { podSpec, tenantObjects, tenantNamespaceManifest, POD_PATHS } from "./manifests.js";

/** For `paperclip-sandbox leases gc --provider kubernetes`: Sandboxes and Jobs by label, across every tenant namespace. */
export const listLeases = defineLeaseLister(async (rawConfig, { matchLabels }): Promise<ListedProviderLease[]> => {
  const config = kubernetesConfig.parse(rawConfig);
  const resources = await listWorkloads(createClientPool()(config), config, { ...(matchLabels ?? {}), "paperclip-provider": "kubernetes" });
  return resources.map((r) => ({ ...r, metadata: {} }));
});
