export { createFakePlugin, type FakePluginDeps } from "./plugin.js";
export { fakeConfig, fakeConfigSchema, type FakeConfig } from "./config.js";
export { default as manifest, FAKE_DRIVER_KEY, FAKE_PLUGIN_ID } from "./manifest.js";
