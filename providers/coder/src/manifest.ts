import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape } from "@paperclip-sandbox/kit";
import { coderConfig } from "./config.js";
import { STREAM_CAPABILITIES } from "./runner-protocol.js";

export const CODER_DRIVER_KEY = "coder";
export const CODER_PLUGIN_ID = "paperclip-sandbox.coder";
/**
 * The default transport: the runner app's stream route through Coder's app proxy (streamed stdin,
 * live binary-safe output, group kill, remote deadline). Workspaces can be stopped and started.
 * The rpty and ssh transports declare their own capabilities on their runners. Every one has login
 * terminals: the agent's reconnecting PTY (`supportsLoginPty`). Kept leases are
 * stopped (a stop build) and started again. Commands ride the kit's command channel where the
 * transport streams (app-proxy's stream route, ssh; not rpty).
 */
export const CODER_SHAPE: DeclaredProviderShape = { transport: { ...STREAM_CAPABILITIES, pty: true }, keepsLeases: true, commandChannel: true };

export default defineSandboxProviderManifest({
  id: CODER_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Coder",
  description: "Runs each Paperclip environment lease in a Coder workspace of its own (self-hosted Coder, REST API v2), commands through a runner app behind Coder's app proxy.",
  driver: {
    driverKey: CODER_DRIVER_KEY,
    displayName: "Coder",
    description: "Coder workspaces from a template: one per lease, deleted by UUID at release, optional reuse through stop and start builds.",
    configSchema: coderConfig.jsonSchema,
  },
  shape: CODER_SHAPE,
});
