// The conformance suite against a bridge you deployed, opt-in: CLOUDFLARE_BRIDGE_URL and
// CLOUDFLARE_BRIDGE_TOKEN enable it (it creates and destroys real sandboxes on that account).
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { BridgeClient } from "./bridge-client.js";
import { cloudflareConfig } from "./config.js";
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
  // What the deployed bridge offers decides what can be checked (a bridge from upstream's template has no extensions).
  const ext = await new BridgeClient(cloudflareConfig.parse(config)).extensionsOf();
  const TEMPLATE = "the deployed bridge has no such extension (upstream's template?)";
  const listed = async (leaseConfig: Record<string, unknown>) => listLeases(leaseConfig, { env: {}, matchLabels: { "paperclip-provider": "cloudflare" } });
  describeConformance({
    name: "cloudflare (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "cloudflare",
    config,
    invalidConfigs: [{ config: { ...config, reuseLease: true }, error: /^Reuse lease: needs Keep alive on/ }],
    reuseConfig: { ...config, reuseLease: true, keepAlive: true },
    ...(ext.leaseLabels
      ? {
          leftovers: async ({ leaseIds }: { leaseIds: readonly string[] }) =>
            (await listed(config)).filter((lease) => leaseIds.includes(lease.providerLeaseId)).map((lease) => `sandbox ${lease.providerLeaseId}`),
          labelsOf: async (id: string, leaseConfig: Record<string, unknown>) => (await listed(leaseConfig)).find((lease) => lease.providerLeaseId === id)?.labels,
        }
      : {}),
    ...(ext.expiry ? {} : { unboundedExpiry: TEMPLATE }),
    skip: {
      ...(ext.streams
        ? {}
        : {
            "execute-live-output": `streams: ${TEMPLATE}`,
            "duplex-channel": `streams: ${TEMPLATE}`,
            "declared-capabilities-match": `streams: ${TEMPLATE} (incremental session output is refused on it)`,
          }),
      "failure-after-create-leaves-nothing": "needs fault injection, which only the emulator has",
      "transient-errors-retried": "needs fault injection, which only the emulator has",
    },
  });
}
