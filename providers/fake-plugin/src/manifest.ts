import { defineSandboxProviderManifest } from "@paperclip-sandbox/kit";
import { fakeConfig } from "./config.js";

export const FAKE_DRIVER_KEY = "fake-plugin";
export const FAKE_PLUGIN_ID = "paperclip-sandbox.fake-plugin";

export default defineSandboxProviderManifest({
  id: FAKE_PLUGIN_ID,
  version: "0.1.0",
  displayName: "Fake sandbox (no isolation)",
  description: "Deterministic sandbox provider for tests: runs commands on the host in a per-lease temp directory. No isolation.",
  driver: {
    driverKey: FAKE_DRIVER_KEY,
    displayName: "Fake sandbox (no isolation)",
    description: "Commands run on the worker's host as the worker's user. For deterministic tests only.",
    configSchema: fakeConfig.jsonSchema,
    // The host still reuses a lease only when the environment's config sets reuseLease: true.
    supportsReusableLeases: true,
    sandboxCapabilities: { reusableLeases: true, nativeSyncIn: true, nativeSyncOut: true, concurrentSyncOperations: true, duplexCommandStream: true },
  },
});
