// Every transport adapter, through the lifecycle layer and the whole conformance suite: a simulated
// vendor per family (see __fixtures__/simulated-vendor/plugin.mjs) with real commands behind it.
import fs from "node:fs";
import { readdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance, findLocalLeftovers, type ConformanceCaseName, type LeftoversContext } from "@paperclip-sandbox/conformance";

const fixtures = fileURLToPath(new URL("../__fixtures__/simulated-vendor/", import.meta.url));
const NOT_LIVE = "this transport delivers output when the command ends (no live output)";

const variants: Array<{ variant: string; skip?: Partial<Record<ConformanceCaseName, string>> }> = [
  { variant: "buffered", skip: { "execute-live-output": NOT_LIVE } },
  { variant: "file-stdio", skip: { "execute-live-output": NOT_LIVE } },
  { variant: "pid-signals" },
  { variant: "no-eof" },
  { variant: "no-env" },
];

for (const { variant, skip } of variants) {
  const workerTmp = fs.mkdtempSync(path.join(os.tmpdir(), `simulated-${variant}-`));
  const base = path.join(workerTmp, `paperclip-simulated-vendor-${process.getuid!()}`);
  afterAll(() => fs.rmSync(workerTmp, { recursive: true, force: true }));
  const leftovers = async (context: LeftoversContext) => {
    const dirs = (await readdir(base).catch(() => [] as string[])).map((name) => path.join(base, name));
    const processes = (await findLocalLeftovers({ ...context, remoteCwds: dirs })).filter((entry) => entry.startsWith("process "));
    return [...dirs.map((dir) => `sandbox ${dir}`), ...processes];
  };
  describeConformance({
    name: `simulated vendor: ${variant}`,
    pluginDir: path.join(fixtures, variant),
    driverKey: `simulated-${variant}`,
    config: { timeoutMs: 60_000 },
    invalidConfigs: [{ config: { timeoutMs: -1 }, error: /timeout/i }],
    reuseConfig: { timeoutMs: 60_000, reuseLease: true },
    workerEnv: { TMPDIR: workerTmp },
    leftovers,
    ...(skip ? { skip } : {}),
  });
}
