export { createKubernetesPlugin, createKubernetesProvider, listLeases, RUN_ID_LABEL, type KubernetesPluginDeps, type KubernetesHandle } from "./plugin.js";
export { kubernetesConfig, kubernetesConfigSchema, crossFieldProblems, type KubernetesConfig } from "./config.js";
export { default as manifest, KUBERNETES_DRIVER_KEY, KUBERNETES_PLUGIN_ID, KUBERNETES_SHAPE } from "./manifest.js";
export { leaseIds, tenantNamespace, shortenName, ulid } from "./names.js";
export { NON_PUBLIC_IPV4, runCiliumPolicy, runNetworkPolicy, standardEgressRules, egressPolicyName } from "./egress.js";
export { podSpec, tenantObjects, tenantNamespaceManifest, POD_PATHS } from "./manifests.js";
