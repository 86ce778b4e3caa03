import { join } from "node:path";
import { createRouter, createVendorClock, HttpError, requireBearer, type EmulatorDefinition, type HttpContext, type RawAnswer } from "@paperclip-sandbox/emulator-kit";
import { registerApiRoutes } from "./api-routes.js";
import { apiErrorEnvelope, daemonErrorEnvelope } from "./errors.js";
import { registerFileRoutes } from "./file-routes.js";
import { createFleet } from "./fleet.js";
import { registerNotificationGateway } from "./notifications.js";
import { resolveOptions, type DaytonaEmulatorOptions } from "./options.js";
import { registerCodeRunRoute, registerProcessRoutes } from "./process-routes.js";
import { sandboxDto } from "./records.js";
import { registerPtyRoutes } from "./pty-routes.js";
import { registerRefusals } from "./refusals.js";
import { registerSessionRoutes } from "./session-routes.js";
import { createSnapshotStore, registerSnapshotRoutes } from "./snapshot-routes.js";

export type { DaytonaEmulatorOptions, DaytonaQuota } from "./options.js";
export { DAYTONA_COVERAGE } from "./coverage.js";

/**
 * The answer to a path nothing serves, as each plane's framework gives it: the toolbox daemon (gin,
 * no NoRoute handler) a plain-text `404 page not found` (also for a known path with another
 * method), the control plane (NestJS) its `Cannot GET /api/x` NotFoundException body.
 */
function notFound(method: string, path: string): RawAnswer {
  if (path.startsWith("/toolbox/")) return { status: 404, body: "404 page not found" };
  return { status: 404, body: { message: `Cannot ${method} ${path}`, error: "Not Found", statusCode: 404 } };
}

/**
 * The Daytona API on loopback for `@daytonaio/sdk`: the control plane at `<url>` (= `apiUrl`, path
 * `/api`), its Socket.IO notification gateway, and the toolbox at `<origin>/toolbox/<sandboxId>`
 * (the DTOs' `toolboxProxyUrl`), all on one port. Every sandbox is a backend bubblewrap jail; the
 * lifecycle intervals run on the kit's vendor clock.
 */
export const emulator: EmulatorDefinition<DaytonaEmulatorOptions> = {
  name: "daytona",
  description: "Daytona control plane, notification gateway and toolbox API (sandboxes are bubblewrap jails)",
  async start(kit, options) {
    const resolved = resolveOptions(options);
    const apiKey = options.apiKey ?? kit.credential("dtn_");
    // Jails under <root>/b, sandbox snapshots' disk copies beside them under <root>/snapshots.
    const { backend, root } = await kit.backend({ parentDir: options.stateParentDir, prefix: "dte", stateSubdir: "b" });
    const clock = options.clock ?? createVendorClock({ timeScale: resolved.timeScale });
    const snapshots = createSnapshotStore({ clock, dir: join(root, "snapshots"), initial: resolved.snapshots ? [...resolved.snapshots] : ["daytonaio/sandbox:emulator"] });
    const fleet = createFleet(backend, resolved, clock, snapshots);
    kit.onClose(() => fleet.close());

    const authorize = (ctx: Pick<HttpContext, "header" | "query">) => void requireBearer(ctx, { accept: [apiKey], missingMessage: "Unauthorized", invalidMessage: "Unauthorized" });
    const router = createRouter({ errorEnvelope: apiErrorEnvelope, bodyLimit: 4 * 1024 * 1024, notFound });
    let origin = "";
    const toolboxUrl = () => `${origin}/toolbox`;
    registerNotificationGateway(router, { fleet, apiKey, organizationId: resolved.organizationId, dto: (record) => sandboxDto(record, toolboxUrl()) });
    // The gateway serves WebSocket only: a long-polling handshake is Engine.IO's "Transport unknown".
    router.get(
      "/api/socket.io/",
      () => {
        throw new HttpError(400, "Transport unknown");
      },
      { errorEnvelope: ({ message }) => ({ code: 0, message }) },
    );
    // Refusals first: some of their paths would otherwise match a served pattern (`/api/sandbox/for-runner`).
    registerRefusals(router, { authorize, apiEnvelope: apiErrorEnvelope, daemonEnvelope: daemonErrorEnvelope });
    registerApiRoutes(router, { fleet, authorize, toolboxUrl });
    registerSnapshotRoutes(router, { fleet, store: snapshots, authorize, organizationId: resolved.organizationId, sandboxDto: (record) => sandboxDto(record, toolboxUrl()) });
    registerProcessRoutes(router, { fleet, authorize });
    registerCodeRunRoute(router, { fleet, authorize });
    const sessions = registerSessionRoutes(router, { fleet, authorize });
    const ptys = registerPtyRoutes(router, { fleet, authorize });
    registerFileRoutes(router, { fleet, authorize });

    const http = await kit.http(router, { port: resolved.port });
    origin = http.url.replace(/\/+$/, "");

    let sweeping = false;
    const sweeper = setInterval(() => {
      if (sweeping) return;
      sweeping = true;
      void fleet.sweep().finally(() => (sweeping = false));
    }, resolved.sweepMs);
    sweeper.unref();
    kit.onClose(() => clearInterval(sweeper));

    const apiUrl = `${origin}/api`;
    return {
      url: apiUrl,
      endpoints: { toolbox: `${origin}/toolbox` },
      credentials: { apiKey },
      env: { DAYTONA_API_URL: apiUrl, DAYTONA_API_KEY: apiKey },
      async leftovers() {
        const records = fleet.all().map((record) => `sandbox ${record.id} (${record.state})`);
        const jails = (await backend.list()).map((jail) => `jail ${jail.id} (${jail.state})`);
        return [...records, ...jails, ...sessions.running(), ...ptys.running()];
      },
    };
  },
};
