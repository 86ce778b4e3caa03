export { createBoxdApi, type BoxdApi, type BoxdMachine, type CreateMachineSpec, type ExecCall, type ExecOutput, MESSAGE_CHUNK_BYTES } from "./api.js";
export { createTokenCache, type ExchangedToken, type TokenCache, type TokenSource } from "./tokens.js";
export { parseApiUrl, checkExchangeUrl, DEFAULT_API_URL, DEFAULT_EXCHANGE_URL } from "./endpoint.js";
export { BOXD_PROTO_PATH, BOXD_SERVICE } from "./wire.js";
export { createBoxdRunner, BOXD_TRANSPORT, BOXD_INLINE_STDIN_BYTES, BOXD_MAX_COMMAND_BYTES, type BoxdTarget } from "./transport.js";
export { boxdConfig, boxdConfigSchema, type BoxdConfig } from "./config.js";
