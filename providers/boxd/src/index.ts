export { createBoxdPlugin, listLeases, BoxdAccountMismatchError, PROBE_DELETE_TIMER_MS, type BoxdPluginDeps, type BoxdInspection } from "./plugin.js";
export { boxdConfig, boxdConfigSchema, API_KEY_ENV, VCPU_SIZES, type BoxdConfig } from "./config.js";
export { default as manifest, BOXD_DRIVER_KEY, BOXD_PLUGIN_ID } from "./manifest.js";

export { createBoxdApi, type BoxdApi, type BoxdApiOptions, type BoxdMachine, type BoxdSnapshot, type CreateMachineSpec, type ExecCall, type ExecOutput } from "./api.js";
export { createTokenCache, type ExchangedToken, type TokenCache, type TokenSource } from "./tokens.js";
export { parseApiUrl, checkExchangeUrl, DEFAULT_API_URL, DEFAULT_EXCHANGE_URL } from "./endpoint.js";
export { BOXD_PROTO_PATH, BOXD_SERVICE } from "./wire.js";
export { createBoxdRunner, BOXD_TRANSPORT, BOXD_INLINE_STDIN_BYTES, BOXD_MAX_COMMAND_BYTES, type BoxdTarget } from "./transport.js";
