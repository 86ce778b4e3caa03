import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape } from "@paperclip-sandbox/kit";
import { cloudflareConfig } from "./config.js";

export const CLOUDFLARE_DRIVER_KEY = "cloudflare";
export const CLOUDFLARE_PLUGIN_ID = "paperclip-sandbox.cloudflare";
/**
 * With this repository's bridge, every command is a streamed process (its `streams` extension):
 * stdin streamed, output live and binary-safe, the group signalled, the bridge's deadline; so duplex
 * channels are declared. Against a bridge from upstream's template the runner is the weaker
 * file-stdio one (its own capabilities: buffered stdin, output at the end) and a duplex open is
 * refused with a clear error: a manifest cannot depend on which bridge a config names.
 * Login terminals (`supportsLoginPty`) are the bridge's `GET /terminal` (the SDK's `terminal()`);
 * against a template bridge an open is refused with what to deploy.
 * Reusable leases are kept running (keep-alive sandboxes).
 */
export const CLOUDFLARE_SHAPE: DeclaredProviderShape = {
  transport: { stdin: "stream", stdinEof: true, binarySafe: true, liveOutput: true, separateStderr: true, signals: "group", remoteTimeout: true, pty: true },
  keepsLeases: true,
  // With this repository's bridge (its terminal route carries the channel); not against upstream's template.
  commandChannel: true,
};

export default defineSandboxProviderManifest({
  id: CLOUDFLARE_PLUGIN_ID,
  // package.json is the one place a version is written (changesets bumps it); the host records this one.
  version: packageVersionOf(import.meta.url),
  displayName: "Cloudflare",
  description: "Runs each Paperclip environment lease in a Cloudflare sandbox (a container behind @cloudflare/sandbox) through a bridge Worker you deploy.",
  driver: {
    driverKey: CLOUDFLARE_DRIVER_KEY,
    displayName: "Cloudflare",
    description: "Cloudflare sandboxes through your bridge Worker: named sessions, keep-alive reuse, native file sync with this repository's bridge.",
    configSchema: cloudflareConfig.jsonSchema,
  },
  shape: CLOUDFLARE_SHAPE,
});
