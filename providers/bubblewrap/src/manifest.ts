import { defineSandboxProviderManifest, packageVersionOf, STREAM_TRANSPORT, type DeclaredProviderShape, type TemplateContract } from "@paperclip-sandbox/kit";
import { providerConfig } from "./config.js";

export const BUBBLEWRAP_DRIVER_KEY = "bubblewrap";
export const BUBBLEWRAP_PLUGIN_ID = "paperclip-sandbox.bubblewrap";
/**
 * The in-jail supervisor meets the whole transport contract and enforces deadlines; stopped jails
 * keep their disk; pseudo-terminals come from util-linux `script` in the jail (`withScriptPty`).
 */
/**
 * Custom images: a template is a copy of a setup sandbox's writable trees in the state directory
 * (src/templates.ts), so it belongs to that directory and that root filesystem. The setup terminal is
 * the kit's SSH gateway in the worker (on the host's machine), over the jail's PTY (README).
 */
export const BUBBLEWRAP_TEMPLATES: TemplateContract = {
  refKind: "snapshot",
  configField: "templateRef",
  identityPaths: ["stateDir", "rootfs"],
  connectionTypes: ["ssh"],
  deletes: true,
};
export const BUBBLEWRAP_SHAPE: DeclaredProviderShape = { transport: { ...STREAM_TRANSPORT, remoteTimeout: true, pty: true }, keepsLeases: true, templates: BUBBLEWRAP_TEMPLATES };

export default defineSandboxProviderManifest({
  id: BUBBLEWRAP_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Bubblewrap sandbox (local)",
  description: "Local Linux sandbox with no account: one bubblewrap jail per lease (user, pid, mount and network namespaces), cgroup limits and name-enforced egress through a host proxy.",
  driver: {
    driverKey: BUBBLEWRAP_DRIVER_KEY,
    displayName: "Bubblewrap (local)",
    description: "Runs each lease in a long-lived bubblewrap jail on the worker's machine. Needs bubblewrap (bwrap) and unprivileged user namespaces.",
    configSchema: providerConfig.jsonSchema,
  },
  shape: BUBBLEWRAP_SHAPE,
});
