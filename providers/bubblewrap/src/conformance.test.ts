// The shared conformance suite against the built bubblewrap worker (run `npx tsc -b providers/bubblewrap`
// first). Runs as whoever runs vitest; nobody.test.ts re-runs this file as uid 65534.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { bubblewrapLeftovers } from "@paperclip-sandbox/sandbox-backend/test-support";

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-conf-"));
const config = { stateDir, timeoutMs: 60_000 };

describeConformance({
  name: `bubblewrap (uid ${process.getuid?.()})`,
  pluginDir: fileURLToPath(new URL("..", import.meta.url)),
  driverKey: "bubblewrap",
  config,
  invalidConfigs: [
    { config: { timeoutMs: -1 }, error: /timeoutMs/ },
    { config: { reuseLease: "yes" }, error: /reuseLease/ },
    { config: { rootfs: "relative/dir" }, error: /rootfs/ },
    { config: { egressAllowCidrs: ["10.0.0.0/99"] }, error: /egressAllowCidrs/ },
    { config: { egressAllowFqdns: ["bad host!"] }, error: /egressAllowFqdns/ },
    { config: { memoryMb: 1 }, error: /memoryMb/ },
  ],
  reuseConfig: { ...config, reuseLease: true },
  leftovers: (context) => bubblewrapLeftovers(stateDir, context.leaseIds),
});

afterAll(() => {
  fs.rmSync(stateDir, { recursive: true, force: true });
});
