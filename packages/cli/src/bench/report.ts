import { formatTable } from "../leases/format.js";
import { formatBytes, formatMs } from "../run/phase-timer.js";
import { sparkline } from "./chart.js";
import { overallVerdict, summarize, type MetricSummary, type Sample, type Verdict } from "./metrics.js";
import { METRIC_LABELS, METRIC_NAMES, describeTarget, type MetricName, type MetricTarget, type Targets } from "./targets.js";

export interface SyncThroughputSample {
  i: number;
  direction: "in" | "out";
  bytes: number;
  ms: number | null;
  ok: boolean;
  note?: string;
}

export interface KubernetesFallbackRecommendation {
  /** Recorded only: the CLI never switches providers by itself. */
  recommended: boolean;
  rule: string;
  reasons: string[];
}

export interface BenchReport {
  schema: "paperclip-sandbox.bench.v1";
  verdict: Verdict;
  provider: { driverKey: string; pluginDir: string; package: string; version: string };
  startedAt: string;
  finishedAt: string;
  interrupted: boolean;
  samplesRequested: number;
  command: string[];
  config: Record<string, unknown>;
  notes: string[];
  metrics: Record<MetricName, MetricSummary & { label: string; target: MetricTarget; samples: Sample[] }>;
  syncThroughput: {
    payloadBytes: number;
    inMBps: number | null;
    outMBps: number | null;
    samples: SyncThroughputSample[];
  };
  recommendation: { kubernetesFallback: KubernetesFallbackRecommendation };
}

const FALLBACK_RULE = "fall back to the Kubernetes provider after two consecutive cold acquisition failures or a cold acquisition p95 breach";

/** The Kubernetes fallback rule, evaluated on the cold acquisition samples (recorded, never acted on). */
export function kubernetesFallback(coldSamples: readonly Sample[], coldSummary: MetricSummary, coldTarget: MetricTarget): KubernetesFallbackRecommendation {
  const reasons: string[] = [];
  for (let i = 1; i < coldSamples.length; i++) {
    if (coldSamples[i]!.outcome === "failed" && coldSamples[i - 1]!.outcome === "failed") {
      reasons.push(`two consecutive cold acquisition failures (samples ${coldSamples[i - 1]!.i} and ${coldSamples[i]!.i})`);
      break;
    }
  }
  if (coldTarget.p95Ms !== undefined && coldSummary.p95Ms !== null && coldSummary.p95Ms > coldTarget.p95Ms) {
    reasons.push(`cold acquisition p95 ${coldSummary.p95Ms.toFixed(0)} ms > ${coldTarget.p95Ms} ms`);
  }
  return { recommended: reasons.length > 0, rule: FALLBACK_RULE, reasons };
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

export function buildReport(input: {
  provider: BenchReport["provider"];
  startedAt: Date;
  interrupted: boolean;
  samplesRequested: number;
  command: string[];
  config: Record<string, unknown>;
  notes: string[];
  samples: Record<MetricName, Sample[]>;
  targets: Targets;
  sync: { payloadBytes: number; samples: SyncThroughputSample[] };
}): BenchReport {
  const metrics = {} as BenchReport["metrics"];
  for (const name of METRIC_NAMES) {
    const target = input.targets[name];
    metrics[name] = { label: METRIC_LABELS[name], target, ...summarize(input.samples[name], target), samples: input.samples[name] };
  }
  const rate = (direction: "in" | "out") => median(input.sync.samples.filter((s) => s.direction === direction && s.ok && s.ms).map((s) => s.bytes / 1024 / 1024 / (s.ms! / 1000)));
  return {
    schema: "paperclip-sandbox.bench.v1",
    verdict: input.interrupted ? "UNVERIFIED" : overallVerdict(METRIC_NAMES.map((m) => metrics[m].verdict)),
    provider: input.provider,
    startedAt: input.startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    interrupted: input.interrupted,
    samplesRequested: input.samplesRequested,
    command: input.command,
    config: input.config,
    notes: input.notes,
    metrics,
    syncThroughput: { payloadBytes: input.sync.payloadBytes, inMBps: rate("in"), outMBps: rate("out"), samples: input.sync.samples },
    recommendation: { kubernetesFallback: kubernetesFallback(input.samples.coldAcquire, metrics.coldAcquire, input.targets.coldAcquire) },
  };
}

const ms = (value: number | null) => (value === null ? "-" : formatMs(value));

/** The readable table, a histogram line per metric, throughput and the recommendation. */
export function formatReport(report: BenchReport, files: { report: string; chart?: string }): string {
  const rows = METRIC_NAMES.map((name) => {
    const m = report.metrics[name];
    return [m.label, `${m.ok}/${m.count}`, ms(m.p50Ms), ms(m.p95Ms), m.successRate === null ? "-" : `${(m.successRate * 100).toFixed(1)}%`, describeTarget(m.target), m.verdict];
  });
  const lines = [
    `bench ${report.provider.driverKey}: ${report.verdict}${report.interrupted ? " (interrupted)" : ""}  (${report.samplesRequested} samples per metric)`,
    "",
    formatTable(["METRIC", "OK/N", "P50", "P95", "SUCCESS", "TARGET", "VERDICT"], rows).trimEnd(),
    "",
    "latency distribution:",
    ...METRIC_NAMES.map((name) => {
      const m = report.metrics[name];
      const values = m.samples.filter((s) => s.outcome === "ok").map((s) => s.ms!);
      return `  ${m.label.padEnd(28)} ${sparkline(values)}`;
    }),
    "",
  ];
  for (const name of METRIC_NAMES) {
    const m = report.metrics[name];
    if (m.verdict !== "PASS" && m.reasons.length) lines.push(`  ${m.label}: ${m.verdict}: ${m.reasons.join("; ")}`);
  }
  const t = report.syncThroughput;
  const mbps = (v: number | null) => (v === null ? "-" : `${v.toFixed(1)} MiB/s`);
  lines.push(`sync throughput (${formatBytes(t.payloadBytes)} payload): in ${mbps(t.inMBps)}, out ${mbps(t.outMBps)}`);
  const k = report.recommendation.kubernetesFallback;
  lines.push(`kubernetes fallback: ${k.recommended ? `RECOMMENDED (${k.reasons.join("; ")})` : "not recommended"} [recorded only]`);
  for (const note of report.notes) lines.push(`note: ${note}`);
  lines.push(`report: ${files.report}${files.chart ? `\nchart:  ${files.chart}` : ""}`);
  return `${lines.join("\n")}\n`;
}
