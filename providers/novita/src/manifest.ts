import { defineSandboxProviderManifest, packageVersionOf, ENVD_TRANSPORT, type DeclaredProviderShape } from "@paperclip-sandbox/kit";
import { novitaConfig } from "./config.js";

export const NOVITA_DRIVER_KEY = "novita";
export const NOVITA_PLUGIN_ID = "paperclip-sandbox.novita";
/** envd's process service with the kit's group kill (the full runner contract) and its PTYs; pause/resume keeps leases. */
export const NOVITA_SHAPE: DeclaredProviderShape = { transport: ENVD_TRANSPORT, keepsLeases: true, commandChannel: true };

export default defineSandboxProviderManifest({
  id: NOVITA_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Novita AI",
  description: "Novita AI agent sandboxes through the official novita-sandbox SDK: streamed commands, file-API sync, pause and resume.",
  driver: {
    driverKey: NOVITA_DRIVER_KEY,
    displayName: "Novita AI",
    description: "Runs each lease in a Novita AI sandbox; reusable leases are paused and resumed with their memory and processes.",
    configSchema: novitaConfig.jsonSchema,
  },
  shape: NOVITA_SHAPE,
});
