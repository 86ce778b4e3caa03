import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape, type TemplateContract } from "@paperclip-sandbox/kit";
import { modalConfig } from "./config.js";
import { MODAL_TRANSPORT } from "./transport.js";

export const MODAL_DRIVER_KEY = "modal";
export const MODAL_PLUGIN_ID = "paperclip-sandbox.modal";
/**
 * Custom images: a template is a filesystem snapshot of the setup sandbox published under a name
 * (src/templates.ts), which Paperclip writes into Image. Named images live in a workspace's
 * environment: the server and the environment scope them (the token is a secret, which the host
 * leaves out of its identity check: another workspace's token simply finds no such name). The
 * setup terminal is the kit's, over Modal's PTY execs.
 */
export const MODAL_TEMPLATES: TemplateContract = {
  refKind: "image",
  configField: "image",
  identityPaths: ["serverUrl", "environment"],
  connectionTypes: ["ssh"],
  deletes: true,
};
/** Streamed exec (stdin as a client stream, live stdout/stderr by offset), kept leases, and image templates. */
export const MODAL_SHAPE: DeclaredProviderShape = { transport: MODAL_TRANSPORT, keepsLeases: true, commandChannel: true, templates: MODAL_TEMPLATES };

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
