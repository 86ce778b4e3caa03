// The shared conformance suite against the built boxd worker (run `npm run build` first), forked as
// the host does, speaking gRPC to the boxd emulator on loopback.
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-boxd";
import { listLeases } from "../dist/index.js";

const emu = await runEmulator(emulator, {});
afterAll(() => emu.close());

const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, exchangeUrl: emu.endpoints.exchange!, timeoutMs: 60_000 };

// Both paths: every command over the kit's command channel (one long Exec), and every command an Exec of its own.
for (const channel of ["always", "off"] as const) {
  describeConformance({
    name: `boxd (emulator, gRPC, command channel ${channel})`,
    workerEnv: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "boxd",
    config,
    invalidConfigs: [
      { config: { ...config, vcpu: 3 }, error: /^vCPUs: must be one of 1, 2, 4, 8/ },
      { config: { ...config, vcpu: 2, snapshot: "base" }, error: /^vCPUs: cannot be combined with Snapshot/ },
      { config: { ...config, apiUrl: "http://boxd.example.com:9443" }, error: /^API URL: must use https/ },
      { config: { ...config, namePrefix: "Not_A_Label" }, error: /^Name prefix: must be lowercase letters/ },
      { config: { ...config, apiKey: undefined }, error: /^API key: required \(or set BOXD_API_KEY/ },
    ],
    reuseConfig: { ...config, reuseLease: true },
    leftovers: () => emu.leftovers(),
    labelsOf: async (providerLeaseId, leaseConfig) => (await listLeases(leaseConfig, { env: {} })).find((lease) => lease.providerLeaseId === providerLeaseId)?.labels,
    // The lease's first Exec is its channel's: cut before any output.
    commandChannel: {
      cutBeforeHello: async () => {
        const mark = emu.requests.mark();
        emu.faults.inject({ kind: "drop-stream", route: "/boxd.api.v1.BoxdApi/Exec", afterMessages: 0, times: 1 });
        return () => emu.requests.list({ since: mark, includeRunning: true }).filter((r) => r.faults.includes("drop-stream")).length;
      },
      vendorCalls: () => {
        const mark = emu.requests.mark();
        return async () => emu.requests.list({ since: mark, includeRunning: true }).map((r) => r.route ?? r.path);
      },
    },
    faults: {
      // The acquire's first call after the create (the workspace's Exec): refused, non-retryably
      // (with the channel, the channel's own Exec comes first and fails over to that Exec).
      failAfterCreate: async () => {
        emu.faults.inject({ kind: "status", route: "/boxd.api.v1.BoxdApi/Exec", grpcCode: 9, times: channel === "always" ? 2 : 1 });
      },
      transient: async (kind, count) => {
        if (kind === "429") emu.faults.inject({ kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 1 });
        else emu.faults.inject({ kind: "status", route: "*", grpcCode: 14, times: count });
      },
      reset: async () => emu.faults.clear(),
    },
  });
}
