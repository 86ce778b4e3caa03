import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRouter, requireBearer, type EmulatorDefinition, type HttpContext } from "@paperclip-sandbox/emulator-kit";
import { createSandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import { registerApiRoutes } from "./api-routes.js";
import { apiErrorEnvelope } from "./errors.js";
import { registerFileRoutes } from "./file-routes.js";
import { createFleet } from "./fleet.js";
import { resolveOptions, type DaytonaEmulatorOptions } from "./options.js";
import { registerProcessRoutes } from "./process-routes.js";
import { registerSessionRoutes } from "./session-routes.js";

export type { DaytonaEmulatorOptions, DaytonaQuota } from "./options.js";

/**
 * The Daytona API on loopback for `@daytonaio/sdk`: the control plane at `<url>` (= `apiUrl`, path
 * `/api`) and the toolbox at `<origin>/toolbox/<sandboxId>` (the DTOs' `toolboxProxyUrl`), both on one
 * port. Every sandbox is a backend bubblewrap jail; the lifecycle intervals run on `minuteMs`.
 */
export const emulator: EmulatorDefinition<DaytonaEmulatorOptions> = {
  name: "daytona",
  description: "Daytona control plane and toolbox API (sandboxes are bubblewrap jails)",
  async start(kit, options) {
    const resolved = resolveOptions(options);
    const apiKey = options.apiKey ?? kit.credential("dtn_");
    const stateDir = await mkdtemp(join(options.stateParentDir ?? tmpdir(), "dte-"));
    kit.onClose(() => rm(stateDir, { recursive: true, force: true }));
    const backend = createSandboxBackend({ stateDir });
    kit.onClose(() => backend.close());
    const fleet = createFleet(backend, resolved);
    kit.onClose(() => fleet.close());

    const authorize = (ctx: Pick<HttpContext, "header" | "query">) =>
      void requireBearer(ctx, { accept: [apiKey], missingMessage: "Unauthorized", invalidMessage: "Unauthorized" });
    const router = createRouter({ errorEnvelope: apiErrorEnvelope, bodyLimit: 4 * 1024 * 1024 });
    let origin = "";
    registerApiRoutes(router, { fleet, authorize, toolboxUrl: () => `${origin}/toolbox` });
    registerProcessRoutes(router, { fleet, authorize });
    const sessions = registerSessionRoutes(router, { fleet, authorize });
    registerFileRoutes(router, { fleet, authorize });

    const http = await kit.http(router, { port: resolved.port });
    origin = http.url.replace(/\/+$/, "");

    const sweepEvery = Math.min(1_000, Math.max(10, Math.floor(resolved.minuteMs / 10)));
    let sweeping = false;
    const sweeper = setInterval(() => {
      if (sweeping) return;
      sweeping = true;
      void fleet.sweep().finally(() => (sweeping = false));
    }, sweepEvery);
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
        return [...records, ...jails, ...sessions.running()];
      },
    };
  },
};
