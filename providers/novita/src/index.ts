export { createNovitaPlugin, listLeases, type NovitaPluginDeps } from "./plugin.js";
export { novitaConfig, novitaConfigSchema, NOVITA_API_KEY_ENV, type NovitaConfig } from "./config.js";
export { novitaConnection, novitaControlPlane, type NovitaConnection } from "./control-plane.js";
export { guardedCall, statusRecorder, emptyBodyError } from "./empty-body-guard.js";
export { default as manifest, NOVITA_DRIVER_KEY, NOVITA_PLUGIN_ID, NOVITA_SHAPE } from "./manifest.js";
