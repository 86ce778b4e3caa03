// The coder provider through the whole suite: the built worker, forked as the host does, against the
// Coder emulator (workspaces are jails whose user is coder; the runner app is the one this package ships).
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { CONFORMANCE_CASE_NAMES, describeConformance, type ConformanceCaseName } from "@paperclip-sandbox/conformance";
import { DIRECT_RUNNER_REFUSED } from "./config.js";
import { startCoderEmulator } from "./__fixtures__/emulator.js";

const world = await startCoderEmulator();
afterAll(() => world.emu.close(), 120_000);

const { emu, config } = world;
const exact = (message: string) => new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
const common = {
  pluginDir: fileURLToPath(new URL("..", import.meta.url)),
  driverKey: "coder",
  leftovers: () => emu.leftovers(),
  faults: {
    // The workspace exists, then its start build fails: the acquire must delete it.
    failAfterCreate: async () => void world.control.failNext("start", "terraform apply: emulated failure after create"),
    transient: async (kind: "429" | "503", count: number) =>
      void emu.faults.inject(kind === "429" ? { kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 1 } : { kind: "status", status: 503, route: "*", times: count }),
    reset: async () => emu.faults.clear(),
  },
  skip: {
    "resource-labels": "Coder workspaces carry no labels: the workspace name carries hashes of them (names.ts; lifecycle.test.ts checks ownership by name)",
  } as Partial<Record<ConformanceCaseName, string>>,
};

// The default transport on both paths: every command over the kit's command channel (one stream
// route socket per lease), and every command a socket of its own.
for (const channel of ["always", "off"] as const) {
  describeConformance({
    ...common,
    name: `coder (emulator, app-proxy, command channel ${channel})`,
    workerEnv: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    config,
    invalidConfigs: [
      { config: { ...config, directRunnerUrl: "http://10.0.0.5:4100" }, error: exact(`Direct runner URL: ${DIRECT_RUNNER_REFUSED}`) },
      { config: { ...config, remoteCwd: "/home/coder/a/b" }, error: /^Workspace directory: must be a directory directly under \/home\/coder/ },
      { config: { ...config, remoteCwd: "/workspace" }, error: /^Workspace directory: must be a directory directly under \/home\/coder/ },
      { config: { ...config, commandTransport: "exec" }, error: /^Command transport: / },
      { config: { ...config, coderUrl: "http://coder.example.com" }, error: /^Coder URL: must use https/ },
      { config: { ...config, template: "no spaces" }, error: /^Template: must be a Coder template name/ },
      { config: { ...config, workspaceName: "x".repeat(16) }, error: /^Workspace name prefix: must be at most 15 characters/ },
      { config: { ...config, stopAfterHours: 0 }, error: /^Stop after \(hours\): / },
    ],
    reuseConfig: { ...config, reuseLease: true },
    // The channel's cut before its hello is command-channel.test.ts's: the app proxy's first stream is not the channel's.
    commandChannel: {
      vendorCalls: () => {
        const mark = emu.requests.mark();
        return async () => emu.requests.list({ since: mark, includeRunning: true }).map((r) => r.route ?? r.path);
      },
    },
  });
}

// The agent's terminal: every case that drives a runner again; the rest is the same lease code.
const RUNNER_CASES = new Set<ConformanceCaseName>([
  "validate-good-config",
  "acquire",
  "realize-workspace",
  "execute-stdout-stderr",
  "execute-exit-codes",
  "execute-argument-quoting",
  "execute-env",
  "execute-cwd",
  "execute-stdin",
  "execute-timeout-ends-process-group",
  "background-process-survives",
  "background-child-holding-stdout",
  "sync-large-file-roundtrip",
  "sync-tree-modes-symlinks-excludes",
  "sync-single-file-mode",
  "sync-all-byte-values-roundtrip",
  "release-receipt-after-execution",
  "resume-reusable-lease",
  "worker-restart-mid-lease",
  "nothing-left-behind",
]);
describeConformance({
  ...common,
  name: "coder (emulator, rpty)",
  config: { ...config, commandTransport: "rpty" },
  reuseConfig: { ...config, commandTransport: "rpty", reuseLease: true },
  invalidConfigs: [],
  skip: Object.fromEntries(CONFORMANCE_CASE_NAMES.filter((name) => !RUNNER_CASES.has(name)).map((name) => [name, "transport-independent: covered by the app-proxy suite"])),
});

// coder ssh through coderBin: the runner cases against a stand-in CLI (the real one needs Coder's
// tailnet; see __fixtures__/fake-coder.mjs), which checks the CLI's environment contract.
const fakeCoder = fileURLToPath(new URL("./__fixtures__/fake-coder.mjs", import.meta.url));
// ssh streams too: both paths.
for (const channel of ["always", "off"] as const) {
  describeConformance({
    ...common,
    name: `coder (emulator, ssh via a stand-in coder CLI, command channel ${channel})`,
    workerEnv: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    config: { ...config, commandTransport: "ssh", coderBin: fakeCoder },
    reuseConfig: { ...config, commandTransport: "ssh", coderBin: fakeCoder, reuseLease: true },
    invalidConfigs: [],
    skip: Object.fromEntries(
      CONFORMANCE_CASE_NAMES.filter((name) => !RUNNER_CASES.has(name) && name !== "execute-live-output").map((name) => [name, "transport-independent: covered by the app-proxy suite"]),
    ),
  });
}
