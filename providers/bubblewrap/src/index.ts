export { createBubblewrapPlugin, type BubblewrapPluginDeps } from "./plugin.js";
export { providerConfig, configSchema, type BubblewrapConfig } from "./config.js";
export { default as manifest, BUBBLEWRAP_DRIVER_KEY, BUBBLEWRAP_PLUGIN_ID } from "./manifest.js";
export { listLeases, findOrphans, defaultStateDir, type LeaseSummary, type LeaseRecord } from "./lease-store.js";
export { reapLease } from "./reap.js";
export { RESOLVE_ENV } from "./resolver.js";
