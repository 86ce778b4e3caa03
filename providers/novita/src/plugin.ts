import { defineEnvdSandboxProvider, envdRpcEndpointOf, type EnvdSandboxLike } from "@paperclip-sandbox/kit";
import { novitaConfig, type NovitaConfig } from "./config.js";
import { novitaConnection, novitaControlPlane } from "./control-plane.js";
import { NOVITA_DRIVER_KEY } from "./manifest.js";

export interface NovitaPluginDeps {
  /** The clock of lease deadlines (tests). */
  now?: () => number;
}

const spec = {
  driverKey: NOVITA_DRIVER_KEY,
  vendor: "novita",
  config: novitaConfig,
  connection: novitaConnection,
  controlPlane: novitaControlPlane,
  template: (config: NovitaConfig) => config.template,
  sandboxTimeoutMs: (config: NovitaConfig) => config.timeoutMs,
  workspace: { path: (config: NovitaConfig) => config.requestedCwd },
  reusable: (config: NovitaConfig) => config.reuseLease,
  shape: (config: NovitaConfig) => ({ template: config.template, domain: config.domain ?? null, apiUrl: config.apiUrl ?? null, secure: config.secure }),
  requestTimeoutMs: (config: NovitaConfig) => config.requestTimeoutMs,
  // Stdin (the command channel's) goes in one envd StreamInput stream to the URL the SDK's
  // transport uses, with its headers (routing pair, access token, the connection's headers).
  rpcEndpoint: (sandbox: EnvdSandboxLike) => envdRpcEndpointOf(sandbox, "Novita", "all"),
  // The SDK buffers every upload into a Blob: a file-backed one is not read into memory first.
  upload: "blob" as const,
  // Its downloads are bounded as a whole by the request timeout: the kit bounds them instead.
  downloadTimeoutIsWholeBody: true,
  killWhenPauseFails: true,
};

export function createNovitaPlugin(deps: NovitaPluginDeps = {}) {
  return defineEnvdSandboxProvider({ ...spec, ...(deps.now ? { now: deps.now } : {}) });
}

const provider = createNovitaPlugin();
/** For `paperclip-sandbox leases gc --provider novita`: this provider's sandboxes by their metadata. */
export const listLeases = provider.listLeases;
export default provider.plugin;
