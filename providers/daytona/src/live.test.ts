// The same conformance suite against the real Daytona, only when DAYTONA_API_KEY is set (it creates
// and deletes real sandboxes on that account). DAYTONA_API_URL and DAYTONA_TARGET are optional.
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { listLeases } from "./plugin.js";

const apiKey = process.env.DAYTONA_API_KEY;
const SKIP_LINE = "live Daytona suite skipped: set DAYTONA_API_KEY (optionally DAYTONA_API_URL, DAYTONA_TARGET) to run it against Daytona";

if (!apiKey) {
  describe("daytona (live)", () => {
    it.skip(SKIP_LINE, () => undefined);
  });
  console.info(`[daytona] ${SKIP_LINE}`);
} else {
  const config = {
    apiKey,
    ...(process.env.DAYTONA_API_URL ? { apiUrl: process.env.DAYTONA_API_URL } : {}),
    ...(process.env.DAYTONA_TARGET ? { target: process.env.DAYTONA_TARGET } : {}),
    timeoutMs: 120_000,
  };
  const listed = async (leaseConfig: Record<string, unknown>) => listLeases(leaseConfig, { env: {}, matchLabels: { "paperclip-provider": "daytona" } });
  describeConformance({
    name: "daytona (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "daytona",
    config,
    invalidConfigs: [{ config: { ...config, cpu: 2 }, error: /^Daytona resource settings require image-backed sandbox creation/ }],
    reuseConfig: { ...config, reuseLease: true },
    // What this run made and Daytona still lists.
    leftovers: async ({ leaseIds }) => (await listed(config)).filter((lease) => leaseIds.includes(lease.providerLeaseId)).map((lease) => `sandbox ${lease.providerLeaseId} (${lease.state})`),
    labelsOf: async (id, leaseConfig) => (await listed(leaseConfig)).find((lease) => lease.providerLeaseId === id)?.labels,
    skip: {
      "execute-live-output": "process/execute answers when the command ends (live output needs liveOutput: true)",
      "failure-after-create-leaves-nothing": "needs fault injection, which only the emulator has",
      "transient-errors-retried": "needs fault injection, which only the emulator has",
    },
  });
}
