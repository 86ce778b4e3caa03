// The shared conformance suite against the built modal worker (run `npm run build` first), forked as
// the host does, with the real `modal` SDK talking gRPC to the Modal emulator on loopback.
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-modal";
import { listLeases } from "../dist/index.js";

const emu = await runEmulator(emulator, {});
afterAll(() => emu.close());

const config = {
  appName: "paperclip-conformance",
  image: "node:22",
  tokenId: emu.credentials.tokenId!,
  tokenSecret: emu.credentials.tokenSecret!,
  serverUrl: emu.url,
  execTimeoutMs: 60_000,
};

// Both paths: every command over the kit's command channel, and every command an exec of its own.
for (const channel of ["always", "off"] as const) {
  describeConformance({
    name: `modal (emulator, real SDK), command channel ${channel}`,
    workerEnv: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "modal",
    config,
    invalidConfigs: [
      { config: { ...config, sandboxTimeoutMs: 1500 }, error: /^Sandbox timeout \(ms\): must be a whole number of seconds \(a multiple of 1000\)$/ },
      { config: { ...config, sandboxTimeoutMs: 90_000_000 }, error: /^Sandbox timeout \(ms\): must be at most 86400000/ },
      { config: { ...config, workdir: "relative/dir" }, error: /^Working directory: must be an absolute POSIX path/ },
      { config: { ...config, blockNetwork: true, cidrAllowlist: ["10.0.0.0/8"] }, error: /^Allowed IP ranges: cannot be combined with Block network/ },
      { config: { ...config, tokenSecret: undefined }, error: /^Token secret: required \(or set MODAL_TOKEN_SECRET/ },
    ],
    reuseConfig: { ...config, reuseLease: true },
    leftovers: () => emu.leftovers(),
    labelsOf: async (providerLeaseId, leaseConfig) => (await listLeases(leaseConfig, { env: {} })).find((lease) => lease.providerLeaseId === providerLeaseId)?.labels,
    faults: {
      // The acquire's first exec (making the workdir) follows the create: refuse it, non-retryably
      // (with the channel, the channel's own exec comes first and fails over to that exec).
      failAfterCreate: async () => {
        emu.faults.inject({ kind: "status", route: "/modal.task_command_router.TaskCommandRouter/TaskExecStart", grpcCode: 9, times: channel === "always" ? 2 : 1 });
      },
      transient: async (kind, count) => {
        if (kind === "429") emu.faults.inject({ kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 1 });
        else emu.faults.inject({ kind: "status", route: "*", grpcCode: 14, times: count });
      },
      reset: async () => emu.faults.clear(),
    },
  });
}
