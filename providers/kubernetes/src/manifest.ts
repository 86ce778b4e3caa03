import { CHANNEL_EXEC_CAPABILITIES, defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape } from "@paperclip-sandbox/kit";
import { kubernetesConfig } from "./config.js";

export const KUBERNETES_DRIVER_KEY = "kubernetes";
export const KUBERNETES_PLUGIN_ID = "paperclip-sandbox.kubernetes";
/**
 * Pod exec over the v5 channel protocol: streamed binary-safe stdin with half-close, live separate
 * output; the group kill comes from withRemoteGroupKill; pseudo-terminals from `script` in the
 * container (withScriptPty). Reusable leases keep the pod.
 */
export const KUBERNETES_SHAPE: DeclaredProviderShape = { transport: { ...CHANNEL_EXEC_CAPABILITIES, signals: "group", pty: true }, keepsLeases: true, commandChannel: true };

export default defineSandboxProviderManifest({
  id: KUBERNETES_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Kubernetes",
  description: "Runs each agent run as a hardened pod in a per-company namespace of your own Kubernetes cluster (agent-sandbox Sandbox or batch/v1 Job).",
  driver: {
    driverKey: KUBERNETES_DRIVER_KEY,
    displayName: "Kubernetes",
    description: "A pod per run in the tenant namespace paperclip-<company>: Pod Security restricted, deny-all network baseline, task-scoped egress, file sync over pod exec.",
    configSchema: kubernetesConfig.jsonSchema,
  },
  shape: KUBERNETES_SHAPE,
});
