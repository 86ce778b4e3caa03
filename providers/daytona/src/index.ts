export { createDaytonaPlugin, createDaytonaProvider, listLeases, type DaytonaPluginDeps } from "./plugin.js";
export { daytonaConfig, daytonaConfigSchema, type DaytonaConfig } from "./config.js";
export { default as manifest, DAYTONA_DRIVER_KEY, DAYTONA_PLUGIN_ID } from "./manifest.js";
