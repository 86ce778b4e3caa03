// The same conformance suite against the real exe.dev, only when EXE_API_KEY and a key registered
// with the account are set (it creates and deletes real VMs on that account): EXE_SSH_PRIVATE_KEY
// (the key itself) or EXE_SSH_KEY_FILE (its path). EXE_API_URL is optional.
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { listLeases } from "./plugin.js";

const apiKey = process.env.EXE_API_KEY;
const sshPrivateKey = process.env.EXE_SSH_PRIVATE_KEY;
const sshIdentityFile = process.env.EXE_SSH_KEY_FILE;
const SKIP_LINE =
  "live exe.dev suite skipped: set EXE_API_KEY (a token allowing new, ls, rm) and EXE_SSH_PRIVATE_KEY or EXE_SSH_KEY_FILE (a key registered with the account) to run it against exe.dev";

if (!apiKey || (!sshPrivateKey && !sshIdentityFile)) {
  describe("exe-dev (live)", () => {
    it.skip(SKIP_LINE, () => undefined);
  });
  console.info(`[exe-dev] ${SKIP_LINE}`);
} else {
  const config = {
    apiKey,
    ...(sshPrivateKey ? { sshPrivateKey } : { sshIdentityFile }),
    ...(process.env.EXE_API_URL ? { apiUrl: process.env.EXE_API_URL } : {}),
    timeoutMs: 120_000,
  };
  const listed = (leaseConfig: Record<string, unknown>) => listLeases(leaseConfig, { env: {}, matchLabels: { "paperclip-provider": "exe-dev" } });
  describeConformance({
    name: "exe-dev (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "exe-dev",
    config,
    invalidConfigs: [{ config: { apiKey }, error: /^SSH private key or SSH identity file: one is required/ }],
    reuseConfig: { ...config, reuseLease: true },
    // What this run made and exe.dev still lists.
    leftovers: async ({ leaseIds }) => (await listed(config)).filter((lease) => leaseIds.includes(lease.providerLeaseId)).map((lease) => `vm ${lease.providerLeaseId} (${lease.state})`),
    labelsOf: async (id, leaseConfig) => (await listed(leaseConfig)).find((lease) => lease.providerLeaseId === id)?.labels,
    unboundedExpiry: "exe.dev VMs live until they are deleted: the provider can bound none, so the host fails closed",
    skip: {
      "failure-after-create-leaves-nothing": "needs fault injection, which only the emulator has",
      "transient-errors-retried": "needs fault injection, which only the emulator has",
    },
  });
}
