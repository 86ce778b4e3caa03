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
  { variant: "channel" },
];

// The channel variant tallies, per lease, commands over the channel and fresh execs.
const channelTallyDir = fs.mkdtempSync(path.join(os.tmpdir(), "simulated-channel-tally-"));
const channelTally = path.join(channelTallyDir, "tally");
afterAll(() => {
  const last = new Map<string, { over: number; fresh: number }>();
  for (const line of fs.existsSync(channelTally) ? fs.readFileSync(channelTally, "utf8").trim().split("\n") : []) {
    const [lease, over, fresh] = line.split(" ");
    last.set(lease!, { over: Number(over), fresh: Number(fresh) });
  }
  fs.rmSync(channelTallyDir, { recursive: true, force: true });
  if (last.size === 0) return; // the channel variant did not run (filtered out)
  const totals = [...last.values()].reduce((sum, t) => ({ over: sum.over + t.over, fresh: sum.fresh + t.fresh }), { over: 0, fresh: 0 });
  console.log(`simulated vendor: channel: ${totals.over} commands over the channel, ${totals.fresh} fresh, ${last.size} leases`);
  if (totals.over === 0 || totals.fresh > 0)
    throw new Error(`the channel variant ran ${totals.fresh} command(s) as fresh execs and ${totals.over} over the channel: conformance did not exercise the channel alone`);
});

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
    workerEnv: { TMPDIR: workerTmp, ...(variant === "channel" ? { SIMULATED_VENDOR_CHANNEL_TALLY: channelTally } : {}) },
    leftovers,
    ...(skip ? { skip } : {}),
  });
}
