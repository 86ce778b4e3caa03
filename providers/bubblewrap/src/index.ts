export { createBubblewrapPlugin, LeaseGoneError, type BubblewrapPluginDeps } from "./plugin.js";
export { providerConfig, configSchema, type BubblewrapConfig } from "./config.js";
export { default as manifest, BUBBLEWRAP_DRIVER_KEY, BUBBLEWRAP_PLUGIN_ID } from "./manifest.js";
export { listLeases, findOrphans, defaultStateDir, reapLease, type LeaseSummary, type LeaseRecord } from "./leases.js";
export { RESOLVE_ENV } from "@paperclip-sandbox/sandbox-backend";
