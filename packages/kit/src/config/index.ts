export { ConfigError } from "./errors.js";
export { defineProviderConfig, mutuallyExclusive, HOST_ENVELOPE_KEYS, HOST_OWNED_KEYS } from "./define.js";
export type { ProviderConfig, ProviderConfigOptions } from "./define.js";
export { fields, SECRET_REF_FORMAT, DEFAULT_MAX_TIMEOUT_MS } from "./fields.js";
export { secretFieldPaths } from "./secret-paths.js";
