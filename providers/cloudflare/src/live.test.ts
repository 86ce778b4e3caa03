// The conformance suite against a bridge you deployed, opt-in: CLOUDFLARE_BRIDGE_URL and
// CLOUDFLARE_BRIDGE_TOKEN enable it (it creates and destroys real sandboxes on that account).
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { listLeases } from "./plugin.js";

const bridgeBaseUrl = process.env.CLOUDFLARE_BRIDGE_URL;
const bridgeAuthToken = process.env.CLOUDFLARE_BRIDGE_TOKEN;
const SKIP_LINE = "live Cloudflare suite skipped: set CLOUDFLARE_BRIDGE_URL and CLOUDFLARE_BRIDGE_TOKEN (a deployed bridge) to run it";

if (!bridgeBaseUrl || !bridgeAuthToken) {
  describe("cloudflare (live)", () => {
    it.skip(SKIP_LINE, () => undefined);
  });
  console.info(`[cloudflare] ${SKIP_LINE}`);
} else {
  const config = { bridgeBaseUrl, bridgeAuthToken, timeoutMs: 120_000 };
  const listed = async (leaseConfig: Record<string, unknown>) => listLeases(leaseConfig, { env: {}, matchLabels: { "paperclip-provider": "cloudflare" } });
  describeConformance({
    name: "cloudflare (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "cloudflare",
    config,
    invalidConfigs: [{ config: { ...config, reuseLease: true }, error: /^Reuse lease: needs Keep alive on/ }],
    reuseConfig: { ...config, reuseLease: true, keepAlive: true },
    leftovers: async ({ leaseIds }) => (await listed(config)).filter((lease) => leaseIds.includes(lease.providerLeaseId)).map((lease) => `sandbox ${lease.providerLeaseId}`),
    labelsOf: async (id, leaseConfig) => (await listed(leaseConfig)).find((lease) => lease.providerLeaseId === id)?.labels,
    skip: {
      "execute-live-output": "the bridge's exec answers when the command ends",
      "failure-after-create-leaves-nothing": "needs fault injection, which only the emulator has",
      "transient-errors-retried": "needs fault injection, which only the emulator has",
    },
  });
}
