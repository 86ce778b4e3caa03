export { createExeDevPlugin, createExeDevProvider, listLeases, type ExeDevPluginDeps, type ExeDevHandle } from "./plugin.js";
export { exeDevConfig, exeDevConfigSchema, type ExeDevConfig } from "./config.js";
export { default as manifest, EXE_DEV_DRIVER_KEY, EXE_DEV_PLUGIN_ID } from "./manifest.js";
