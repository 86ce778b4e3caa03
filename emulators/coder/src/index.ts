import { createRouter, type EmulatorDefinition } from "@paperclip-sandbox/emulator-kit";
import { registerApiRoutes } from "./api-routes.js";
import { registerAppProxy } from "./app-proxy.js";
import { newSessionToken } from "./auth.js";
import { Deployment } from "./deployment.js";
import { coderErrorEnvelope } from "./errors.js";
import { resolveOptions, type CoderEmulatorOptions } from "./options.js";
import { registerPty } from "./pty.js";

export type { AgentSpec, AppSpec, CoderEmulatorOptions, ParameterSpec, TemplateSpec } from "./options.js";
export type { DeploymentControl } from "./deployment.js";
export { BARE_TEMPLATE } from "./options.js";
export { WORKSPACE_HOME, WORKSPACE_USER } from "./deployment.js";
export { CODER_VERSION } from "./api-routes.js";

/**
 * Coder's REST API v2 on loopback (users, organizations, templates and rich parameters,
 * workspaces, builds as provisioner jobs, agents), its path-based app proxy and the agent's
 * reconnecting PTY, on one port. Every workspace is a backend jail whose user is `coder` in
 * /home/coder; the template's startup script runs in it as the agent would.
 */
export const emulator: EmulatorDefinition<CoderEmulatorOptions> = {
  name: "coder",
  description: "Coder API v2, app proxy and reconnecting PTY (workspaces are bubblewrap jails)",
  async start(kit, options) {
    const resolved = resolveOptions(options);
    const sessionToken = options.sessionToken ?? newSessionToken();
    const { backend } = await kit.backend({ ...(options.stateParentDir ? { parentDir: options.stateParentDir } : {}), prefix: "cde" });
    let origin = "";
    const deployment = new Deployment(backend, resolved, () => origin);
    kit.onClose(() => deployment.close());
    options.expose?.(deployment.control);

    // Workspace archives and stdin travel in request bodies: Coder's own limit is far above this.
    const router = createRouter({
      errorEnvelope: coderErrorEnvelope,
      bodyLimit: 8 * 1024 * 1024,
      // coderd's chi router: httpapi.RouteNotFound.
      notFound: () => ({ status: 404, body: { message: "Route not found." } }),
    });
    registerApiRoutes(router, { deployment, sessionToken, origin: () => origin });
    const pty = registerPty(router, { deployment, sessionToken, idleMs: 5 * 60_000 });
    kit.onClose(() => pty.closeAll());
    registerAppProxy(router, { deployment, sessionToken });

    const http = await kit.http(router, { port: resolved.port, secretHeaders: ["coder-session-token"] });
    origin = http.url.replace(/\/+$/, "");

    const sweeper = setInterval(() => deployment.sweep(), 1_000);
    sweeper.unref();
    kit.onClose(() => clearInterval(sweeper));

    return {
      url: origin,
      credentials: { sessionToken },
      env: { CODER_URL: origin, CODER_SESSION_TOKEN: sessionToken },
      async leftovers() {
        return [...(await deployment.leftovers()), ...pty.running()];
      },
    };
  },
};
