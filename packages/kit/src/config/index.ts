export { ConfigError } from "./errors.js";
export { defineProviderConfig, mutuallyExclusive, HOST_ENVELOPE_KEYS, HOST_OWNED_KEYS, HOST_SINGLE_LINE_MAX_LENGTH, SERVER_MAX_LENGTH_KEYWORD } from "./define.js";
export type { ProviderConfig, ProviderConfigOptions } from "./define.js";
export { fields, resolveSecretRef, SECRET_REF_FORMAT, DEFAULT_MAX_TIMEOUT_MS, RUNNER_LIFECYCLE_MODES } from "./fields.js";
export { withUi, configSchemaUiProblems, GROUP_KEYWORD, ADVANCED_KEYWORD, FIELD_MAX_LENGTH, FIELD_MAX_ITEMS } from "./ui.js";
export type { FieldUi } from "./ui.js";
export { secretFieldPaths } from "./secret-paths.js";
