import { defineSandboxProviderManifest, packageVersionOf, type DeclaredProviderShape } from "@paperclip-sandbox/kit";
import { cloudflareConfig } from "./config.js";

export const CLOUDFLARE_DRIVER_KEY = "cloudflare";
export const CLOUDFLARE_PLUGIN_ID = "paperclip-sandbox.cloudflare";
/**
 * The bridge's `POST /exec` through the kit's file-stdio runner: buffered stdin, binary-safe (base64
 * between markers), output when the command ends, group kill by a second command, the bridge's
 * deadline. Reusable leases are kept running (keep-alive sandboxes).
 */
export const CLOUDFLARE_SHAPE: DeclaredProviderShape = {
  transport: { stdin: "buffered", stdinEof: true, binarySafe: true, liveOutput: false, separateStderr: true, signals: "group", remoteTimeout: true },
  canStop: true,
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
