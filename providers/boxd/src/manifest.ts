import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape, type TemplateContract } from "@paperclip-sandbox/kit";
import { boxdConfig } from "./config.js";
import { BOXD_PTY_TRANSPORT } from "./transport.js";

export const BOXD_DRIVER_KEY = "boxd";
export const BOXD_PLUGIN_ID = "paperclip-sandbox.boxd";
/**
 * Custom images: a template is a boxd snapshot of the setup machine (src/templates.ts), named in the
 * key's org, so it belongs to that endpoint and org (an API key is a secret, which the host leaves out
 * of its identity check: another org's key simply finds no such snapshot). Applying one removes
 * Snapshot. No connection type yet: the setup terminal needs an SSH endpoint the host can reach.
 */
export const BOXD_TEMPLATES: TemplateContract = {
  refKind: "snapshot",
  configField: "templateRef",
  unsetFields: ["snapshot"],
  identityPaths: ["apiUrl", "exchangeUrl", "org"],
  connectionTypes: [],
  deletes: true,
};
/** Streamed exec over one bidi Exec per command, login terminals (Exec with tty), kept (suspended) leases, and snapshot templates. */
export const BOXD_SHAPE: DeclaredProviderShape = { transport: BOXD_PTY_TRANSPORT, keepsLeases: true, commandChannel: true, templates: BOXD_TEMPLATES };

export default defineSandboxProviderManifest({
  id: BOXD_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "boxd",
  description: "Runs each Paperclip lease in a boxd microVM (boxd.sh), over boxd's documented gRPC API.",
  driver: {
    driverKey: BOXD_DRIVER_KEY,
    displayName: "boxd",
    description:
      "boxd microVMs: an isolated KVM machine per lease with its own kernel and disk; commands over boxd's Exec stream; reused leases are suspended (memory, processes and disk kept) and resumed in about 0.1 s.",
    configSchema: boxdConfig.jsonSchema,
  },
  shape: BOXD_SHAPE,
});
