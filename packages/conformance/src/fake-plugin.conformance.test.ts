// The fake-plugin provider through the whole suite: built worker, forked as the host does.
import { stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeConformance, findLocalLeftovers, type LeftoversContext } from "./index.js";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
// The worker gets no TMPDIR from the host, so its os.tmpdir() is the default; ours matches when unset.
const fakeLeaseBase = path.join(os.tmpdir(), `paperclip-fake-plugin-${process.getuid!()}`);

/** Lease directories this run created that still exist, plus processes running inside them. */
async function fakeLeftovers(context: LeftoversContext): Promise<string[]> {
  const found: string[] = [];
  for (const leaseId of context.leaseIds) {
    const dir = path.join(fakeLeaseBase, leaseId);
    if (await stat(dir).then(() => true, () => false)) found.push(`lease directory ${dir}`);
  }
  // Processes still running in a lease's workspace (the lease dir check above covers the dirs).
  const processes = (await findLocalLeftovers(context)).filter((entry) => entry.startsWith("process "));
  return [...found, ...processes];
}

describeConformance({
  name: "fake-plugin",
  pluginDir: path.join(repoRoot, "providers/fake-plugin"),
  driverKey: "fake-plugin",
  config: { image: "fake:latest", timeoutMs: 60_000 },
  invalidConfigs: [
    { config: { timeoutMs: -5 }, error: /timeoutMs/ },
    { config: { timeoutMs: "soon" }, error: /timeoutMs/ },
    { config: { image: "" }, error: /image/ },
    { config: { reuseLease: "yes" }, error: /reuseLease/ },
  ],
  reuseConfig: { image: "fake:latest", timeoutMs: 60_000, reuseLease: true },
  leftovers: fakeLeftovers,
});
