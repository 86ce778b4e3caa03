import { defineSandboxProviderManifest, packageVersionOf, STREAM_TRANSPORT, type DeclaredProviderShape } from "@paperclip-sandbox/kit";
import { fakeConfig } from "./config.js";

export const FAKE_DRIVER_KEY = "fake-plugin";
export const FAKE_PLUGIN_ID = "paperclip-sandbox.fake-plugin";
/** A local process runner (the full transport contract) and kept leases; the plugin is built from the same. */
export const FAKE_SHAPE: DeclaredProviderShape = { transport: STREAM_TRANSPORT, keepsLeases: true };

export default defineSandboxProviderManifest({
  id: FAKE_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Fake sandbox (no isolation)",
  description: "Deterministic sandbox provider for tests: runs commands on the host in a per-lease temp directory. No isolation.",
  driver: {
    driverKey: FAKE_DRIVER_KEY,
    displayName: "Fake sandbox (no isolation)",
    description: "Commands run on the worker's host as the worker's user. For deterministic tests only.",
    configSchema: fakeConfig.jsonSchema,
  },
  shape: FAKE_SHAPE,
});
