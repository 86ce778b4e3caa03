// The shared conformance suite against the built bubblewrap worker (run `npx tsc -b providers/bubblewrap`
// first). Runs as whoever runs vitest; nobody.test.ts re-runs this file as uid 65534.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { sandboxLeftovers } from "@paperclip-sandbox/sandbox-backend/test-support";
import { listLeases } from "./plugin.js";

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-conf-"));
const config = { stateDir, timeoutMs: 60_000 };

describeConformance({
  name: `bubblewrap (uid ${process.getuid?.()})`,
  pluginDir: fileURLToPath(new URL("..", import.meta.url)),
  driverKey: "bubblewrap",
  config,
  invalidConfigs: [
    // Errors name the field by its title, as the host's form labels it.
    { config: { timeoutMs: -1 }, error: /^Command timeout \(ms\): must be at least 1$/ },
    { config: { reuseLease: "yes" }, error: /^Reuse lease: must be a boolean$/ },
    { config: { rootfs: "relative/dir" }, error: /^Root filesystem: must be an absolute POSIX path/ },
    { config: { egressAllowCidrs: ["10.0.0.0/99"] }, error: /^Allowed IP ranges, item 1: prefix must be 0-32$/ },
    { config: { egressAllowFqdns: ["ok.example", "bad host!"] }, error: /^Allowed host names, item 2: must be a host name/ },
    { config: { memoryMb: 1 }, error: /^Memory limit \(MiB\): must be at least 16$/ },
    { config: { memoryMb: 1, cpu: 0 }, error: /^2 problems: CPU limit \(cores\): must be greater than 0; Memory limit \(MiB\): must be at least 16$/ },
  ],
  reuseConfig: { ...config, reuseLease: true },
  leftovers: (context) => sandboxLeftovers(stateDir, context.leaseIds),
  // The same listing `leases gc --provider bubblewrap` uses.
  labelsOf: async (leaseId) => (await listLeases(config, { env: {} })).find((lease) => lease.providerLeaseId === leaseId)?.labels,
});

afterAll(() => {
  fs.rmSync(stateDir, { recursive: true, force: true });
});
