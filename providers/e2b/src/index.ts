export { createE2bPlugin, listLeases, type E2bPluginDeps } from "./plugin.js";
export { e2bConfig, e2bConfigSchema, E2B_API_KEY_ENV, type E2bConfig } from "./config.js";
export { e2bConnection, e2bControlPlane, type E2bConnection } from "./control-plane.js";
export { default as manifest, E2B_DRIVER_KEY, E2B_PLUGIN_ID, E2B_SHAPE } from "./manifest.js";
