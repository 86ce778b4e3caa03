import { randomBytes } from "node:crypto";
import { Miniflare } from "miniflare";
import { checkTimeScale, createRouter, createVendorClock, type EmulatorDefinition, type VendorClock } from "@paperclip-sandbox/emulator-kit";
import { bundleBridge } from "./bundle.js";
import { containerErrorEnvelope } from "./container-errors.js";
import { createFleet, registerContainerRoutes, STREAM_POLL_MS } from "./container.js";
import { registerFront } from "./front.js";

export { CONTAINER_VERSION, foregroundText } from "./container.js";
export { bundleBridge, bridgeDir } from "./bundle.js";

export interface CloudflareEmulatorOptions {
  /** The bridge's BRIDGE_AUTH_TOKEN (default a fresh random one, in `credentials.token`). */
  token?: string;
  /** The bridge's keepalive comment interval (its KEEPALIVE_INTERVAL_MS; default 15000). */
  keepaliveMs?: number;
  /** Answer as an upstream-template bridge: no extensions in health, extra routes 404. */
  legacyBridge?: boolean;
  /** How often the stand-in container's streamed exec reads a command's log (default 100 container ms, as 0.7.21's). */
  streamPollMs?: number;
  /**
   * Container milliseconds per real millisecond (the kit's vendor clock): the stand-in container's
   * command timeouts and log poll. The Worker's own timers (keepalive, deadlines) run in workerd's
   * real time; `keepaliveMs` sets the keepalive.
   */
  timeScale?: number;
  /** The container's clock (default a vendor clock at `timeScale`). */
  clock?: VendorClock;
  /** Loopback port of the bridge URL (default 0: any free one). */
  port?: number;
}

/** workerd 1.20260424 knows compatibility dates up to its own. */
const COMPATIBILITY_DATE = "2026-04-24";

/**
 * The bridge Worker (`providers/cloudflare/bridge`) run for real in workerd through miniflare, with
 * the real `@cloudflare/sandbox` 0.7.21 Durable Object; only the DO's container is stood in: a
 * loopback server speaking the 0.7.x container HTTP API, each container a sandbox-backend jail.
 * `url` is the bridge (a recording front that forwards to workerd), `credentials.token` its bearer.
 */
export const emulator: EmulatorDefinition<CloudflareEmulatorOptions> = {
  name: "cloudflare",
  description: "Cloudflare sandbox bridge Worker in workerd (miniflare) with @cloudflare/sandbox 0.7.21; containers are jails",
  async start(kit, raw) {
    const options = raw ?? {};
    const token = options.token ?? `cfb_${randomBytes(24).toString("base64url")}`;
    const clock = options.clock ?? createVendorClock({ timeScale: checkTimeScale(options.timeScale) });
    const { backend } = await kit.backend();
    const fleet = createFleet(backend);
    kit.onClose(() => fleet.destroyAll());

    const containerRouter = createRouter({ errorEnvelope: containerErrorEnvelope, bodyLimit: 64 * 1024 * 1024 });
    registerContainerRoutes(containerRouter, fleet, { clock, streamPollMs: options.streamPollMs ?? STREAM_POLL_MS });
    // The DO-to-container hop is inside Cloudflare: a fault on every route is a client's, not this hop's.
    const containers = await kit.http(containerRouter, { internal: true });

    const script = await bundleBridge();
    const mf = new Miniflare({
      host: "127.0.0.1",
      port: 0,
      modules: true,
      script,
      compatibilityDate: COMPATIBILITY_DATE,
      // The bridge's own flags (wrangler.jsonc): request.signal fires when the client goes away.
      compatibilityFlags: ["nodejs_compat", "enable_request_signal"],
      // Straight to the Worker, not through miniflare's entry Worker: only then does a client's
      // disconnect reach the Worker (request.signal), as it does at Cloudflare's edge.
      unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
      durableObjects: { Sandbox: { className: "Sandbox", useSQLite: true }, LeaseRegistry: { className: "LeaseRegistry", useSQLite: true } },
      // The SDK logs a JSON line per call; shown only with CLOUDFLARE_EMULATOR_LOG=1.
      handleRuntimeStdio(stdout: NodeJS.ReadableStream, stderr: NodeJS.ReadableStream) {
        const show = process.env.CLOUDFLARE_EMULATOR_LOG === "1";
        for (const stream of [stdout, stderr]) show ? stream.pipe(process.stderr, { end: false }) : stream.resume();
      },
      bindings: { BRIDGE_AUTH_TOKEN: token, KEEPALIVE_INTERVAL_MS: String(options.keepaliveMs ?? 15_000), EMULATOR_CONTAINER_URL: containers.url },
    });
    kit.onClose(() => mf.dispose());
    await mf.ready;
    const workerUrl = (await mf.unsafeGetDirectURL()).toString();

    const front = createRouter({ errorEnvelope: ({ status, message, code }) => ({ error: code ?? `http_${status}`, message }), bodyLimit: 1024 * 1024 });
    registerFront(front, { workerUrl: () => workerUrl, legacy: options.legacyBridge === true });
    const http = await kit.http(front, { ...(options.port !== undefined ? { port: options.port } : {}) });
    return {
      url: http.url,
      endpoints: { bridge: http.url, worker: workerUrl, container: containers.url },
      credentials: { token },
      env: { CLOUDFLARE_BRIDGE_URL: http.url, CLOUDFLARE_BRIDGE_TOKEN: token },
      leftovers: async () => fleet.live().map((id) => `container ${id}`),
    };
  },
};
