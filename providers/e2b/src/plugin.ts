import { defineEnvdSandboxProvider, envdRpcEndpointOf, type EnvdSandboxLike } from "@paperclip-sandbox/kit";
import { e2bConfig, type E2bConfig } from "./config.js";
import { E2B_REQUEST_TIMEOUT_MS, e2bConnection, e2bControlPlane } from "./control-plane.js";
import { E2B_DRIVER_KEY, E2B_TEMPLATES } from "./manifest.js";

export interface E2bPluginDeps {
  /** The clock of lease deadlines (tests). */
  now?: () => number;
}

const spec = {
  driverKey: E2B_DRIVER_KEY,
  vendor: "e2b",
  config: e2bConfig,
  connection: e2bConnection,
  controlPlane: e2bControlPlane,
  template: (config: E2bConfig) => config.template,
  sandboxTimeoutMs: (config: E2bConfig) => config.timeoutMs,
  // E2B's default user's working directory is its home; upstream's plugin used `$(pwd)/paperclip-workspace`.
  workspace: { homeSubdir: "paperclip-workspace" },
  reusable: (config: E2bConfig) => config.reuseLease,
  shape: (config: E2bConfig) => ({ template: config.template, apiUrl: config.apiUrl ?? null }),
  requestTimeoutMs: () => E2B_REQUEST_TIMEOUT_MS,
  // Stdin (the command channel's) goes in one envd StreamInput stream to the URL the SDK's
  // transport uses, with its headers (routing pair, access token, user agent).
  rpcEndpoint: (sandbox: EnvdSandboxLike) => envdRpcEndpointOf(sandbox, "E2b", "user-agent"),
  // The SDK streams a ReadableStream upload as one octet-stream request.
  upload: "stream" as const,
  templates: E2B_TEMPLATES,
};

export function createE2bPlugin(deps: E2bPluginDeps = {}) {
  return defineEnvdSandboxProvider({ ...spec, ...(deps.now ? { now: deps.now } : {}) });
}

const provider = createE2bPlugin();
/** For `paperclip-sandbox leases gc --provider e2b`: this provider's sandboxes by their metadata. */
export const listLeases = provider.listLeases;
export default provider.plugin;
