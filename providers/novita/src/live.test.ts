// The conformance suite against the real Novita AI, opt-in: NOVITA_API_KEY enables it
// (NOVITA_DOMAIN and NOVITA_TEMPLATE pick the region and template). Costs sandbox time.
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { listLeases } from "../dist/index.js";

const apiKey = process.env.NOVITA_API_KEY;

if (!apiKey) {
  describe("novita live", () => {
    it.skip("skipped: set NOVITA_API_KEY to run the conformance suite against real Novita AI", () => undefined);
  });
} else {
  const config = { timeoutMs: 300_000, template: process.env.NOVITA_TEMPLATE ?? "base", ...(process.env.NOVITA_DOMAIN ? { domain: process.env.NOVITA_DOMAIN } : {}) };
  const ours = async (leaseIds: readonly string[]) =>
    (await listLeases(config, { env: process.env, matchLabels: { "paperclip-provider": "novita" } })).filter((l) => leaseIds.includes(l.providerLeaseId));
  describeConformance({
    name: "novita (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "novita",
    config,
    invalidConfigs: [{ config: { ...config, timeoutMs: 9_999 }, error: /^Sandbox timeout \(ms\): must be at least 10000$/ }],
    reuseConfig: { ...config, reuseLease: true },
    workerEnv: { NOVITA_API_KEY: apiKey },
    leftovers: async ({ leaseIds }) => (await ours(leaseIds)).map((l) => `sandbox ${l.providerLeaseId} (${l.state})`),
    labelsOf: async (id) => (await ours([id]))[0]?.labels,
  });
}
