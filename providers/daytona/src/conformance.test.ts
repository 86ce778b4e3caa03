// The daytona provider through the whole suite: the built worker, forked as the host does, driving
// the real @daytonaio/sdk against the Daytona emulator (sandboxes are bubblewrap jails).
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { CONFORMANCE_CASE_NAMES, describeConformance, type ConformanceCaseName } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-daytona";
import { RESOURCES_NEED_IMAGE, SNAPSHOT_AND_IMAGE } from "./config.js";
import { listLeases } from "./plugin.js";

const emu = await runEmulator(emulator, {});
afterAll(() => emu.close(), 60_000);

const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, timeoutMs: 60_000 };
const exact = (message: string) => new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
const common = {
  pluginDir: fileURLToPath(new URL("..", import.meta.url)),
  driverKey: "daytona",
  leftovers: () => emu.leftovers(),
  labelsOf: async (providerLeaseId: string, leaseConfig: Record<string, unknown>) => (await listLeases(leaseConfig, { env: {} })).find((lease) => lease.providerLeaseId === providerLeaseId)?.labels,
  faults: {
    // The call after the create is the workspace's mkdir; it fails on both attempts.
    failAfterCreate: async () => void emu.faults.inject({ kind: "status", status: 500, route: "/toolbox/:sandboxId/process/execute", method: "POST", times: 2 }),
    transient: async (kind: "429" | "503", count: number) =>
      void emu.faults.inject(kind === "429" ? { kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 1 } : { kind: "status", status: 503, route: "*", times: count }),
    reset: async () => emu.faults.clear(),
  },
};

describeConformance({
  ...common,
  name: "daytona (emulator, process/execute)",
  config,
  invalidConfigs: [
    { config: { ...config, cpu: 2 }, error: exact(RESOURCES_NEED_IMAGE) },
    { config: { ...config, snapshot: "daytonaio/sandbox:0.8.0", image: "python:3.12-slim" }, error: exact(SNAPSHOT_AND_IMAGE) },
    { config: { ...config, image: "python:3.12-slim", memory: 3 }, error: /^Memory \(GiB\): must be one of 1, 2, 4, 8$/ },
    { config: { ...config, timeoutMs: 86_400_001 }, error: /^Command timeout \(ms\): must be at most 86400000$/ },
    { config: { ...config, autoDeleteInterval: -2 }, error: /^Auto-delete after stop \(min\): must be at least -1$/ },
    { config: { ...config, apiUrl: "http://daytona.example/api" }, error: /^API URL: must use https/ },
  ],
  reuseConfig: { ...config, reuseLease: true },
  skip: {
    "execute-live-output": "process/execute answers when the command ends; live output goes through the session API (liveOutput: true, the suite below)",
  },
});

// The session runner (liveOutput) through the cases that exercise a runner; the rest are the same
// lease code as above.
const RUNNER_CASES = new Set<ConformanceCaseName>([
  "validate-good-config",
  "acquire",
  "execute-stdout-stderr",
  "execute-exit-codes",
  "execute-argument-quoting",
  "execute-env",
  "execute-cwd",
  "execute-stdin",
  "execute-live-output",
  "execute-timeout-ends-process-group",
  "background-process-survives",
  "background-child-holding-stdout",
  "sync-large-file-roundtrip",
  "sync-tree-modes-symlinks-excludes",
  "sync-single-file-mode",
  "release-receipt-after-execution",
  "nothing-left-behind",
]);
describeConformance({
  ...common,
  name: "daytona (emulator, sessions with live output)",
  config: { ...config, liveOutput: true },
  invalidConfigs: [],
  skip: Object.fromEntries(CONFORMANCE_CASE_NAMES.filter((name) => !RUNNER_CASES.has(name)).map((name) => [name, "runner-independent: covered by the process/execute suite"])),
});
