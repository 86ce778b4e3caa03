export { createCloudflarePlugin, createCloudflareProvider, listLeases, type CloudflarePluginDeps, type CloudflareHandle } from "./plugin.js";
export { cloudflareConfig, cloudflareConfigSchema, type CloudflareConfig } from "./config.js";
export { BridgeClient, type BridgeExtensions } from "./bridge-client.js";
export { default as manifest, CLOUDFLARE_DRIVER_KEY, CLOUDFLARE_PLUGIN_ID, CLOUDFLARE_SHAPE } from "./manifest.js";
