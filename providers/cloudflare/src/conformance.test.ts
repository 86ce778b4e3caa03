// The cloudflare provider through the whole suite: the built worker, forked as the host does,
// against the bridge Worker running for real in workerd (miniflare) with the real
// @cloudflare/sandbox 0.7.21; only the container is stood in (a jail per sandbox).
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-cloudflare";
import { REUSE_NEEDS_KEEP_ALIVE } from "./config.js";
import { listLeases } from "./plugin.js";

const emu = await runEmulator(emulator, {});
afterAll(() => emu.close(), 60_000);

const config = { bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token!, timeoutMs: 60_000 };
const exact = (message: string) => new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);

// Every path: every command over the kit's command channel (its multiplexer on the bridge's
// terminal route), the default (a lease's first command a streamed process, the channel starting
// beside it), and every command a streamed process of its own.
for (const channel of ["always", "default", "off"] as const) {
  describeConformance({
    name: `cloudflare (bridge in workerd, command channel ${channel})`,
    workerEnv: channel === "default" ? {} : { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "cloudflare",
    config,
    invalidConfigs: [
      { config: { ...config, reuseLease: true }, error: exact(REUSE_NEEDS_KEEP_ALIVE) },
      { config: { ...config, bridgeBaseUrl: "http://bridge.example.com" }, error: /^Bridge URL: must use https/ },
      { config: { ...config, timeoutMs: 86_400_001 }, error: /^Command timeout \(ms\): must be at most 86400000$/ },
      { config: { ...config, requestedCwd: "workspace" }, error: /^Workspace directory: must be an absolute POSIX path/ },
    ],
    reuseConfig: { ...config, reuseLease: true, keepAlive: true },
    leftovers: () => emu.leftovers(),
    labelsOf: async (providerLeaseId, leaseConfig) => (await listLeases(leaseConfig, { env: {} })).find((lease) => lease.providerLeaseId === providerLeaseId)?.labels,
    // The channel's cut before its hello is command-channel.test.ts's: the bridge's acquire runs no
    // command, so the lease's first terminal does not open within the acquire.
    commandChannel: {
      // Bridge requests made since (the channel's own terminal socket opened before).
      vendorCalls: () => {
        const mark = emu.requests.mark();
        return async () => emu.requests.list({ since: mark, includeRunning: true }).map((r) => `${r.method} ${r.route ?? r.path}`);
      },
    },
    faults: {
      // The bridge makes the sandbox, then the connection breaks before its answer: the kit finds it by
      // the run's labels (GET /leases) and destroys it.
      failAfterCreate: async () => void emu.faults.inject({ kind: "reset", route: "/api/paperclip-sandbox/v1/leases/:action", method: "POST", times: 1 }),
      transient: async (kind, count) =>
        void emu.faults.inject(kind === "429" ? { kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 1 } : { kind: "status", status: 503, route: "*", times: count }),
      reset: async () => emu.faults.clear(),
    },
  });
}
