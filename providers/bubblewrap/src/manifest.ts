import { defineSandboxProviderManifest } from "@paperclip-sandbox/kit";
import { providerConfig } from "./config.js";

export const BUBBLEWRAP_DRIVER_KEY = "bubblewrap";
export const BUBBLEWRAP_PLUGIN_ID = "paperclip-sandbox.bubblewrap";

export default defineSandboxProviderManifest({
  id: BUBBLEWRAP_PLUGIN_ID,
  version: "0.1.0",
  displayName: "Bubblewrap sandbox (local)",
  description:
    "Local Linux sandbox with no account: one bubblewrap jail per lease (user, pid, mount and network namespaces), cgroup limits and name-enforced egress through a host proxy.",
  driver: {
    driverKey: BUBBLEWRAP_DRIVER_KEY,
    displayName: "Bubblewrap (local)",
    description: "Runs each lease in a long-lived bubblewrap jail on the worker's machine. Needs bubblewrap (bwrap) and unprivileged user namespaces.",
    configSchema: providerConfig.jsonSchema,
    // The host reuses a lease only when the environment's config also sets reuseLease: true.
    supportsReusableLeases: true,
    sandboxCapabilities: { reusableLeases: true, nativeSyncIn: true, nativeSyncOut: true, concurrentSyncOperations: true, duplexCommandStream: true },
  },
});
