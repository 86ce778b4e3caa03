// The conformance suite against the real E2B, opt-in: E2B_API_KEY enables it (E2B_TEMPLATE picks a
// template, default base). Costs a few minutes of sandbox time per run.
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { listLeases } from "../dist/index.js";

const apiKey = process.env.E2B_API_KEY;

if (!apiKey) {
  describe("e2b live", () => {
    it.skip("skipped: set E2B_API_KEY to run the conformance suite against real E2B", () => undefined);
  });
} else {
  const config = { timeoutMs: 300_000, template: process.env.E2B_TEMPLATE ?? "base" };
  const ours = async (leaseIds: readonly string[]) =>
    (await listLeases(config, { env: process.env, matchLabels: { "paperclip-provider": "e2b" } })).filter((l) => leaseIds.includes(l.providerLeaseId));
  describeConformance({
    name: "e2b (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "e2b",
    config,
    invalidConfigs: [{ config: { ...config, timeoutMs: 10 }, error: /^Sandbox timeout \(ms\): must be at least 1000$/ }],
    reuseConfig: { ...config, reuseLease: true },
    workerEnv: { E2B_API_KEY: apiKey },
    leftovers: async ({ leaseIds }) => (await ours(leaseIds)).map((l) => `sandbox ${l.providerLeaseId} (${l.state})`),
    labelsOf: async (id) => (await ours([id]))[0]?.labels,
  });
}
