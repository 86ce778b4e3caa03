// The fake-plugin provider through the whole suite: built worker, forked as the host does, with a
// private TMPDIR so every lease directory under it is this suite's (a failed acquire's included).
import fs from "node:fs";
import { readdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance, findLocalLeftovers, type LeftoversContext } from "@paperclip-sandbox/conformance";

const pluginDir = fileURLToPath(new URL("..", import.meta.url));
const workerTmp = fs.mkdtempSync(path.join(os.tmpdir(), "fake-conformance-"));
const fakeLeaseBase = path.join(workerTmp, `paperclip-fake-plugin-${process.getuid!()}`);
afterAll(() => fs.rmSync(workerTmp, { recursive: true, force: true }));

/** Every lease directory still under the worker's base, plus processes running inside one. */
async function fakeLeftovers(context: LeftoversContext): Promise<string[]> {
  const dirs = (await readdir(fakeLeaseBase).catch(() => [] as string[])).map((name) => path.join(fakeLeaseBase, name));
  const found = dirs.map((dir) => `lease directory ${dir}`);
  const processes = (await findLocalLeftovers({ ...context, remoteCwds: dirs })).filter((entry) => entry.startsWith("process "));
  return [...found, ...processes];
}

const config = { image: "fake:latest", timeoutMs: 60_000 };

describeConformance({
  name: "fake-plugin",
  pluginDir,
  driverKey: "fake-plugin",
  config,
  invalidConfigs: [
    { config: { timeoutMs: -5 }, error: /^Command timeout \(ms\): must be at least 1$/ },
    { config: { timeoutMs: "soon" }, error: /^Command timeout \(ms\): must be a number$/ },
    { config: { image: 5 }, error: /^Image \(recorded only\): must be a string$/ },
    { config: { image: "i".repeat(1_000_000) }, error: /^Image \(recorded only\): must be at most 512 characters$/ },
    { config: { reuseLease: "yes" }, error: /^Reuse lease: must be a boolean$/ },
  ],
  reuseConfig: { ...config, reuseLease: true },
  workerEnv: { TMPDIR: workerTmp },
  leftovers: fakeLeftovers,
  faults: { failAfterCreate: async () => ({ ...config, acquireFailureAfterCreate: "injected by conformance" }) },
});
