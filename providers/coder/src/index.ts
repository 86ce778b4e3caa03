export { createCoderPlugin, createCoderProvider, listLeases, UnsafeLeaseRecordError, type CoderPluginDeps } from "./plugin.js";
export { coderConfig, coderConfigSchema, type CoderConfig } from "./config.js";
export { default as manifest, CODER_DRIVER_KEY, CODER_PLUGIN_ID } from "./manifest.js";
export { runnerTemplateFiles, runnerStartupScript, runnerEmulatorTemplate, RUNNER_PORT } from "./runner-install.js";
