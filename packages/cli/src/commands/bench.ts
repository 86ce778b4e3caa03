import path from "node:path";
import { parsePositiveInt } from "../cli-args.js";
import { UsageError } from "../errors.js";
import { err, out } from "../io.js";
import { LeaseDb } from "../lease-db.js";
import { LeaseTracker } from "../lease-tracker.js";
import { prepareProvider, startValidatedSession, storableConfig } from "../provider-setup.js";
import { writePrivateFile } from "../private-file.js";
import { Interrupts } from "../run/interrupts.js";
import { latencySvg } from "../bench/chart.js";
import { verdictExitCode } from "../bench/metrics.js";
import { buildReport, formatReport } from "../bench/report.js";
import { runBenchSuite } from "../bench/suite.js";
import { METRIC_NAMES, loadTargets } from "../bench/targets.js";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { loadEmulator } from "./emulate.js";

const DEFAULT_MARKER = "paperclip-bench-ok";

function defaultReportPath(driverKey: string, at: Date): string {
  const stamp = at.toISOString().replace(/[-:]/g, "").replace(/\..*$/, "").replace("T", "-");
  return path.resolve(`paperclip-sandbox-bench-${driverKey}-${stamp}.json`);
}

function nonNegativeInt(flag: string, raw: unknown, fallback: number): number {
  if (typeof raw !== "string") return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new UsageError(`${flag}: expected a non-negative integer, got '${raw}'`);
  return Number(raw);
}

/** `bench`: the SLO suite. Exit 0 PASS, 1 FAIL, 2 UNVERIFIED. */
export async function benchCommand(values: Record<string, unknown>, command: string[]): Promise<number> {
  const samples = typeof values.samples === "string" ? parsePositiveInt("--samples", values.samples) : 100;
  const targets = loadTargets(typeof values.targets === "string" ? values.targets : undefined);
  const syncSamples = nonNegativeInt("--sync-samples", values["sync-samples"], 3);
  const syncMb = nonNegativeInt("--sync-size-mb", values["sync-size-mb"], 8);
  const probeCommand = command.length > 0 ? command : ["echo", DEFAULT_MARKER];
  const startedAt = new Date();

  const prepared = await prepareProvider(values);
  // --emulator VENDOR: the vendor's emulator for this run, its URL and credential variables given to
  // the worker as a host would give them (a provider reads them as its config's fallbacks).
  let emulator: RunningEmulator | undefined;
  if (typeof values.emulator === "string") {
    emulator = await runEmulator(await loadEmulator(values.emulator), {});
    prepared.workerEnv = { ...prepared.workerEnv, ...emulator.env };
    for (const value of Object.values(emulator.credentials)) prepared.redactor.add(value);
  }
  const closeEmulator = async () => {
    await emulator?.close();
    emulator = undefined;
  };
  const schemaHasReuse = "reuseLease" in (prepared.provider.configSchema.properties ?? {});
  const explicitReuse = prepared.config.reuseLease;
  const reportPath = typeof values.out === "string" ? path.resolve(values.out) : defaultReportPath(prepared.provider.driverKey, startedAt);
  const chartPath = reportPath.replace(/\.json$/i, "") + ".svg";

  const db = LeaseDb.open(typeof values.db === "string" ? values.db : undefined);
  const session = await startValidatedSession(prepared).catch(async (error: unknown) => {
    db.close();
    await closeEmulator();
    throw error;
  });
  const tracker = new LeaseTracker(db, prepared, "bench");
  const interrupts = new Interrupts({
    notice: err,
    onForce: () => {
      session.client.kill("SIGKILL");
      process.exit(interrupts.exitCode());
    },
  });
  const isTTY = process.stderr.isTTY === true;
  const notes: string[] = [];
  if (!schemaHasReuse && prepared.provider.supportsReusableLeases) {
    notes.push("the config schema has no reuseLease field; warm samples use the config as given");
  }
  const normalized = session.config;
  let result;
  try {
    result = await runBenchSuite({
      session,
      tracker,
      redactor: prepared.redactor,
      samples,
      command: probeCommand,
      expectOutput: command.length > 0 ? undefined : DEFAULT_MARKER,
      coldConfig: schemaHasReuse ? { ...normalized, reuseLease: false } : normalized,
      warmConfig: schemaHasReuse ? { ...normalized, reuseLease: explicitReuse ?? true } : normalized,
      supportsReusableLeases: prepared.provider.supportsReusableLeases,
      syncSamples,
      syncPayloadBytes: syncMb * 1024 * 1024,
      aborted: () => interrupts.signal.aborted,
      progress: (text) => {
        if (isTTY) err(`\r\x1b[2Kbench ${prepared.provider.driverKey}: ${text}`);
      },
    });
  } finally {
    if (isTTY) err("\r\x1b[2K");
    interrupts.dispose();
    await session.close();
    db.close();
    if (emulator) notes.push(`against the ${values.emulator as string} emulator (a vendor API on loopback; its sandboxes are bubblewrap jails here)`);
    await closeEmulator();
  }
  notes.push(...result.notes);
  const report = prepared.redactor.redactDeep(
    buildReport({
      provider: {
        driverKey: prepared.provider.driverKey,
        pluginDir: prepared.provider.pkg.dir,
        package: prepared.provider.pkg.name,
        version: prepared.provider.pkg.version,
      },
      startedAt,
      interrupted: interrupts.signal.aborted,
      samplesRequested: samples,
      command: probeCommand,
      config: storableConfig(prepared, normalized),
      notes,
      samples: result.samples,
      targets,
      sync: result.sync,
    }),
  );
  await writePrivateFile(reportPath, `${JSON.stringify(report, null, 2)}\n`);
  const series = METRIC_NAMES.map((name) => ({
    label: report.metrics[name].label,
    verdict: report.metrics[name].verdict,
    values: report.metrics[name].samples.filter((s) => s.outcome === "ok").map((s) => s.ms!),
    target: report.metrics[name].target,
  }));
  await writePrivateFile(chartPath, latencySvg(`paperclip-sandbox bench: ${prepared.provider.driverKey} (${report.verdict})`, series));
  if (values.json === true) out(`${JSON.stringify(report, null, 2)}\n`);
  else out(formatReport(report, { report: reportPath, chart: chartPath }));
  return interrupts.signal.aborted ? interrupts.exitCode() : verdictExitCode(report.verdict);
}
