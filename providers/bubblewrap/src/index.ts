export { createBubblewrapPlugin, createBubblewrapProvider, listLeases, type BubblewrapPluginDeps } from "./plugin.js";
export { LeaseGoneError } from "@paperclip-sandbox/kit";
export { providerConfig, configSchema, type BubblewrapConfig } from "./config.js";
export { default as manifest, BUBBLEWRAP_DRIVER_KEY, BUBBLEWRAP_PLUGIN_ID } from "./manifest.js";
export { listLeaseDirectories, findOrphans, defaultStateDir, reapLease, type LeaseSummary, type LeaseRecord } from "./leases.js";
export { RESOLVE_ENV } from "@paperclip-sandbox/sandbox-backend";
