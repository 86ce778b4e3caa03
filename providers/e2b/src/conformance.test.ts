// The shared conformance suite against the built e2b worker, the real `e2b` SDK inside it, and the
// envd emulator on loopback (run `npm run build` first).
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-envd";
import { listLeases } from "../dist/index.js";

const emu = await runEmulator(emulator);
afterAll(() => emu.close());

const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 60_000 };

// Both paths: every command over the kit's command channel, and every command a process start of its own.
for (const channel of ["always", "off"] as const) {
  describeConformance({
    name: `e2b (envd emulator, command channel ${channel})`,
    workerEnv: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "e2b",
    config,
    invalidConfigs: [
      { config: { ...config, timeoutMs: 10 }, error: /^Sandbox timeout \(ms\): must be at least 1000$/ },
      { config: { ...config, template: 5 }, error: /^Template: must be a string$/ },
      { config: { ...config, template: "t".repeat(1_000_000) }, error: /^Template: must be at most 256 characters$/ },
      { config: { ...config, apiUrl: "http://example.com" }, error: /^API URL: must use https/ },
      { config: { ...config, reuseLease: "yes" }, error: /^Reuse lease: must be a boolean$/ },
    ],
    reuseConfig: { ...config, reuseLease: true },
    leftovers: () => emu.leftovers(),
    labelsOf: async (providerLeaseId, leaseConfig) => (await listLeases(leaseConfig, { env: {} })).find((lease) => lease.providerLeaseId === providerLeaseId)?.labels,
    // The lease's first process start is its channel's: cut after the start event, before any output.
    commandChannel: {
      cutBeforeHello: async () => {
        const mark = emu.requests.mark();
        emu.faults.inject({ kind: "drop-stream", route: "/process.Process/Start", afterMessages: 1, times: 1 });
        return () => emu.requests.list({ since: mark, includeRunning: true }).filter((r) => r.faults.includes("drop-stream")).length;
      },
      // The lease's timeout refreshes run on their own timer.
      vendorCalls: () => {
        const mark = emu.requests.mark();
        return async () => emu.requests.list({ since: mark, includeRunning: true }).flatMap((r) => (r.route === "/sandboxes/:id/timeout" ? [] : [r.route ?? r.path]));
      },
    },
    faults: {
      // The first call after the create is the process start that makes the workspace (with the
      // channel, the channel's own start comes first and fails over to that process start).
      failAfterCreate: async () => void emu.faults.inject({ kind: "status", status: 500, route: "/process.Process/Start", times: channel === "always" ? 2 : 1 }),
      transient: async (kind, count) =>
        void emu.faults.inject(kind === "429" ? { kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 1 } : { kind: "status", status: 503, route: "*", times: count }),
      reset: async () => emu.faults.clear(),
    },
  });
}
