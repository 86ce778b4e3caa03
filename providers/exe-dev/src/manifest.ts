import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape, type TemplateContract } from "@paperclip-sandbox/kit";
import { exeDevConfig } from "./config.js";

export const EXE_DEV_DRIVER_KEY = "exe-dev";
export const EXE_DEV_PLUGIN_ID = "paperclip-sandbox.exe-dev";
/**
 * Commands are channels on one OpenSSH connection per lease: stdin streamed with EOF, bytes
 * unchanged, output live and apart, the remote process group ended by a second channel; terminals
 * are `ssh -tt` channels (agent login). A reusable
 * lease keeps its VM (exe.dev has no stop). Custom images are template VMs (above).
 */
/**
 * Custom images: exe.dev has no snapshots, so a template is a VM: `cp` of the setup VM (its disk) to
 * an owner-digest name (src/templates.ts); runs start as `cp` of it, and delete is `rm`. VMs live in
 * the token's account, which the host's identity check cannot see (the token is a secret): another
 * account simply lists no such VM. Applying one removes Image and Setup script (a copy has the
 * template's disk and never boots afresh). The setup VM is reached with the kit's SSH terminal.
 */
export const EXE_DEV_TEMPLATES: TemplateContract = {
  refKind: "provider_template",
  configField: "templateRef",
  unsetFields: ["image", "setupScript"],
  identityPaths: ["apiUrl"],
  connectionTypes: ["ssh"],
  deletes: true,
};

export const EXE_DEV_SHAPE: DeclaredProviderShape = {
  transport: { stdin: "stream", stdinEof: true, binarySafe: true, liveOutput: true, separateStderr: true, signals: "group", remoteTimeout: false, pty: true },
  keepsLeases: true,
  // Later commands of a lease ride one long-lived SSH channel (the kit's command channel).
  commandChannel: true,
  templates: EXE_DEV_TEMPLATES,
};

export default defineSandboxProviderManifest({
  id: EXE_DEV_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "exe.dev",
  description: "Runs each Paperclip environment lease in an exe.dev VM: created through exe.dev's HTTPS API, commands over one multiplexed SSH connection.",
  driver: {
    driverKey: EXE_DEV_DRIVER_KEY,
    displayName: "exe.dev",
    description: "exe.dev VMs: HTTPS API for the lifecycle, OpenSSH (one connection per lease, host keys always checked) for commands and file sync.",
    configSchema: exeDevConfig.jsonSchema,
  },
  shape: EXE_DEV_SHAPE,
});
