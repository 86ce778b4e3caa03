import { defineSandboxProviderManifest, packageVersionOf, ENVD_TRANSPORT, type DeclaredProviderShape, type TemplateContract } from "@paperclip-sandbox/kit";
import { e2bConfig } from "./config.js";

export const E2B_DRIVER_KEY = "e2b";
export const E2B_PLUGIN_ID = "paperclip-sandbox.e2b";
/** envd's process service with the kit's group kill (the full runner contract) and its PTYs; pause/resume keeps leases. */
/**
 * Custom images: a template is an E2B snapshot of the setup sandbox (a snapshot is a template in E2B's
 * team namespace), written into `template`. Snapshots belong to the team behind the endpoint: a
 * change of `apiUrl` detaches it. No remote connection yet (connection types []).
 */
export const E2B_TEMPLATES: TemplateContract = { refKind: "snapshot", configField: "template", identityPaths: ["apiUrl"], connectionTypes: [], deletes: true };
export const E2B_SHAPE: DeclaredProviderShape = { transport: ENVD_TRANSPORT, keepsLeases: true, commandChannel: true, templates: E2B_TEMPLATES };

export default defineSandboxProviderManifest({
  id: E2B_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "E2B",
  description: "E2B cloud sandboxes (Firecracker microVMs) through the official e2b SDK: streamed commands, file-API sync, pause and resume.",
  driver: {
    driverKey: E2B_DRIVER_KEY,
    displayName: "E2B",
    description: "Runs each lease in an E2B sandbox; reusable leases are paused and resumed with their memory and processes.",
    configSchema: e2bConfig.jsonSchema,
  },
  shape: E2B_SHAPE,
});
