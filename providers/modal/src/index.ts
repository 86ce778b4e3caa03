export { createModalPlugin, listLeases, type ModalPluginDeps } from "./plugin.js";
export { modalConfig, modalConfigSchema, type ModalConfig } from "./config.js";
export { default as manifest, MODAL_DRIVER_KEY, MODAL_PLUGIN_ID } from "./manifest.js";
export { modalLeaseIds, type ModalLeaseRef } from "./lease-id.js";
export { MODAL_TRANSPORT, MODAL_ARGV_LIMIT, MODAL_MAX_SCRIPT_BYTES, execTimeoutSeconds, createModalRunner, type ModalRunnerOptions } from "./transport.js";
