import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape, type TemplateContract } from "@paperclip-sandbox/kit";
import { daytonaConfig } from "./config.js";

export const DAYTONA_DRIVER_KEY = "daytona";
export const DAYTONA_PLUGIN_ID = "paperclip-sandbox.daytona";
/**
 * Daytona's `process/execute` through the kit's file-stdio runner: buffered stdin, binary-safe
 * (base64 between markers), no live output, group kill by a second call; pseudo-terminals from the
 * toolbox's PTY sessions (login terminals). Sandboxes can be stopped.
 */
/**
 * Custom images: a template is a Daytona snapshot of the setup sandbox (src/templates.ts), written
 * into `snapshot` as upstream's provider does; `image` and the resource settings (which need an image)
 * go. Snapshots belong to the Daytona organization behind the endpoint (and region): changing those
 * detaches the template. No remote connection yet (connection types []).
 */
export const DAYTONA_TEMPLATES: TemplateContract = {
  refKind: "snapshot",
  configField: "snapshot",
  unsetFields: ["image", "cpu", "memory", "disk", "gpu"],
  identityPaths: ["apiUrl", "target"],
  connectionTypes: [],
  deletes: true,
};
export const DAYTONA_SHAPE: DeclaredProviderShape = {
  transport: { stdin: "buffered", stdinEof: true, binarySafe: true, liveOutput: false, separateStderr: true, signals: "group", remoteTimeout: false, pty: true },
  keepsLeases: true,
  templates: DAYTONA_TEMPLATES,
};

export default defineSandboxProviderManifest({
  id: DAYTONA_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Daytona",
  description: "Runs each Paperclip environment lease in a Daytona sandbox (hosted), through the official @daytonaio/sdk.",
  driver: {
    driverKey: DAYTONA_DRIVER_KEY,
    displayName: "Daytona",
    description: "Daytona cloud sandboxes: snapshot- or image-based, quota-safe auto-stop/archive/delete, optional lease reuse.",
    configSchema: daytonaConfig.jsonSchema,
  },
  shape: DAYTONA_SHAPE,
});
