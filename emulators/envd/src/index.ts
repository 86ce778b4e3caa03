import { join } from "node:path";
import { createRouter, createVendorClock, requireApiKey, type EmulatorDefinition, type ErrorEnvelope, type HttpContext } from "@paperclip-sandbox/emulator-kit";
import { controlPlaneRoutes } from "./control-plane.js";
import { refusalRoutes } from "./coverage.js";
import { filesRoutes } from "./files-rest.js";
import { filesystemRoutes } from "./filesystem-service.js";
import { resolveEnvdOptions, type EnvdEmulatorOptions } from "./options.js";
import { processRoutes } from "./process-service.js";
import { SandboxRegistry } from "./sandboxes.js";
import { SnapshotTemplates, snapshotRoutes } from "./snapshots.js";

export type { EnvdEmulatorOptions } from "./options.js";
export { SANDBOX_HOME } from "./envd-access.js";
export { ENVD_USER } from "./sandboxes.js";
export { ENVD_COVERAGE } from "./coverage.js";

/** E2B's error body: the numeric status again in `code` (both SDKs test `error.code === 404`). */
const envdErrorEnvelope: ErrorEnvelope = ({ status, message }) => ({ code: status, message });

/**
 * E2B's control plane and envd (the in-sandbox daemon) on one loopback HTTP/1.1 origin, for the
 * `e2b` SDK (apiUrl + sandboxUrl) and Novita's fork `novita-sandbox` (the same two overrides; its v1
 * create/connect routes and Novita-Sandbox-* headers). Sandboxes are sandbox-backend jails: pause
 * and resume are freeze and thaw, the sandbox timeout runs on a clock tests can compress.
 */
export const emulator: EmulatorDefinition<EnvdEmulatorOptions> = {
  name: "envd",
  description: "E2B / Novita sandboxes: control-plane REST + envd (Connect JSON process and filesystem services, /files)",
  async start(kit, raw) {
    const options = resolveEnvdOptions(raw ?? {});
    const apiKey = options.apiKey ?? kit.credential("e2b_");
    const { backend, stateDir, root } = await kit.backend();
    const clock = options.clock ?? createVendorClock({ timeScale: options.timeScale });
    const sandboxes = new SandboxRegistry(backend, options, clock);
    // Snapshot templates' copies beside the jails (removed with the state directory at close).
    const snapshots = new SnapshotTemplates(join(root, "snapshots"));

    const router = createRouter({ errorEnvelope: envdErrorEnvelope, bodyLimit: 1024 * 1024 });
    // Refusals first: `/sandboxes/metrics` would otherwise be taken for a sandbox id.
    const auth = (ctx: HttpContext) => void requireApiKey(ctx, { header: "x-api-key", accept: [apiKey], missingMessage: "missing API key (X-API-KEY)", invalidMessage: "invalid API key" });
    refusalRoutes(router, auth);
    controlPlaneRoutes(router, { sandboxes, snapshots, options, apiKey });
    snapshotRoutes(router, { registry: sandboxes, snapshots, templates: options.templates, auth });
    filesRoutes(router, sandboxes);
    processRoutes(router, sandboxes);
    filesystemRoutes(router, sandboxes);

    const http = await kit.http(router, { port: options.port });
    return {
      url: http.url,
      endpoints: { api: http.url, sandbox: http.url },
      credentials: { apiKey },
      env: {
        E2B_API_URL: http.url,
        E2B_SANDBOX_URL: http.url,
        E2B_API_KEY: apiKey,
        NOVITA_API_URL: http.url,
        NOVITA_SANDBOX_URL: http.url,
        NOVITA_API_KEY: apiKey,
        // Where the jails live (`leases/<sandbox id>/` each), for leftover checks from outside.
        ENVD_EMULATOR_STATE_DIR: stateDir,
      },
      leftovers: async () => sandboxes.list().map((s) => `sandbox ${s.id} (${s.state})`),
      close: () => sandboxes.closeAll(),
    };
  },
};
