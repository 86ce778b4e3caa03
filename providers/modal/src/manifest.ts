import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape } from "@paperclip-sandbox/kit";
import { modalConfig } from "./config.js";
import { MODAL_TRANSPORT } from "./transport.js";

export const MODAL_DRIVER_KEY = "modal";
export const MODAL_PLUGIN_ID = "paperclip-sandbox.modal";
/** Streamed exec (stdin as a client stream, live stdout/stderr by offset), and kept leases. */
export const MODAL_SHAPE: DeclaredProviderShape = { transport: MODAL_TRANSPORT, keepsLeases: true, commandChannel: true };

export default defineSandboxProviderManifest({
  id: MODAL_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Modal",
  description: "Runs each Paperclip lease in a Modal sandbox (modal.com), through Modal's JavaScript SDK.",
  driver: {
    driverKey: MODAL_DRIVER_KEY,
    displayName: "Modal",
    description: "Modal sandboxes: a container from a registry image per lease, commands over Modal's exec, files over exec streams. Reused leases keep running (billed) or are snapshotted.",
    configSchema: modalConfig.jsonSchema,
  },
  shape: MODAL_SHAPE,
});
