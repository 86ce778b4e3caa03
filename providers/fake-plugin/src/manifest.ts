import type { PaperclipPluginManifestV1 } from "@paperclipai/plugin-sdk";
import { fakeConfig } from "./config.js";

export const FAKE_DRIVER_KEY = "fake-plugin";
export const FAKE_PLUGIN_ID = "paperclip-sandbox.fake-plugin";

const manifest: PaperclipPluginManifestV1 = {
  id: FAKE_PLUGIN_ID,
  apiVersion: 1,
  version: "0.1.0",
  displayName: "Fake sandbox (no isolation)",
  description: "Deterministic sandbox provider for tests: runs commands on the host in a per-lease temp directory. No isolation.",
  author: "Paperclip sandbox providers",
  categories: ["workspace"],
  capabilities: ["environment.drivers.register"],
  entrypoints: { worker: "./dist/worker.js" },
  environmentDrivers: [
    {
      driverKey: FAKE_DRIVER_KEY,
      kind: "sandbox_provider",
      displayName: "Fake sandbox (no isolation)",
      description: "Commands run on the worker's host as the worker's user. For deterministic tests only.",
      configSchema: fakeConfig.jsonSchema,
      // The host still reuses a lease only when the environment's config sets reuseLease: true.
      supportsReusableLeases: true,
      sandboxCapabilities: { reusableLeases: true, nativeSyncIn: true, nativeSyncOut: true },
    },
  ],
};

export default manifest;
