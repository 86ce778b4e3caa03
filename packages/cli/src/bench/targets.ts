import { readConfigFile } from "../config-loader.js";
import { UsageError } from "../errors.js";

export const METRIC_NAMES = ["warmAcquire", "coldAcquire", "coldFirstCommand", "steadyCommand", "cleanup"] as const;
export type MetricName = (typeof METRIC_NAMES)[number];

export const METRIC_LABELS: Readonly<Record<MetricName, string>> = Object.freeze({
  warmAcquire: "warm acquisition (resume)",
  coldAcquire: "cold acquisition",
  coldFirstCommand: "cold first command",
  steadyCommand: "steady command",
  cleanup: "cleanup (release + receipt)",
});

export interface MetricTarget {
  p50Ms?: number;
  p95Ms?: number;
  /** 0..1 */
  minSuccessRate?: number;
}

export type Targets = Record<MetricName, MetricTarget>;

/** The SLO targets (frozen; override with `--targets FILE`). */
export const DEFAULT_TARGETS: Readonly<Record<MetricName, Readonly<MetricTarget>>> = Object.freeze({
  warmAcquire: Object.freeze({ p50Ms: 1_500, p95Ms: 3_000, minSuccessRate: 0.98 }),
  coldAcquire: Object.freeze({ p50Ms: 20_000, p95Ms: 45_000, minSuccessRate: 0.98 }),
  coldFirstCommand: Object.freeze({ p50Ms: 15_000, minSuccessRate: 0.99 }),
  steadyCommand: Object.freeze({ p50Ms: 1_000, p95Ms: 2_000, minSuccessRate: 0.99 }),
  cleanup: Object.freeze({ p50Ms: 5_000, p95Ms: 15_000 }),
});

const TARGET_KEYS = ["p50Ms", "p95Ms", "minSuccessRate"] as const;

/**
 * Reads a targets file (JSON or YAML): `{ <metric>: { p50Ms?, p95Ms?, minSuccessRate? } }`, merged
 * over the defaults field by field; `null` removes a default target.
 */
export function loadTargets(file: string | undefined): Targets {
  const targets = Object.fromEntries(METRIC_NAMES.map((m) => [m, { ...DEFAULT_TARGETS[m] }])) as Targets;
  if (!file) return targets;
  const raw = readConfigFile(file);
  for (const [metric, override] of Object.entries(raw)) {
    if (!(METRIC_NAMES as readonly string[]).includes(metric)) {
      throw new UsageError(`targets file ${file}: unknown metric '${metric}' (metrics: ${METRIC_NAMES.join(", ")})`);
    }
    if (!override || typeof override !== "object" || Array.isArray(override)) {
      throw new UsageError(`targets file ${file}: '${metric}' must be a mapping of ${TARGET_KEYS.join(", ")}`);
    }
    const target = targets[metric as MetricName];
    for (const [key, value] of Object.entries(override as Record<string, unknown>)) {
      if (!(TARGET_KEYS as readonly string[]).includes(key)) {
        throw new UsageError(`targets file ${file}: ${metric}.${key} is not a target (use ${TARGET_KEYS.join(", ")})`);
      }
      const k = key as (typeof TARGET_KEYS)[number];
      if (value === null) {
        delete target[k];
        continue;
      }
      const valid = typeof value === "number" && Number.isFinite(value) && value >= 0 && (k !== "minSuccessRate" || value <= 1);
      if (!valid) throw new UsageError(`targets file ${file}: ${metric}.${key} must be a ${k === "minSuccessRate" ? "number from 0 to 1" : "non-negative number of milliseconds"}`);
      target[k] = value as number;
    }
  }
  return targets;
}

export function describeTarget(target: MetricTarget): string {
  const parts: string[] = [];
  const s = (ms: number) => (ms >= 1000 ? `${ms / 1000}s` : `${ms}ms`);
  if (target.p50Ms !== undefined) parts.push(`p50<=${s(target.p50Ms)}`);
  if (target.p95Ms !== undefined) parts.push(`p95<=${s(target.p95Ms)}`);
  if (target.minSuccessRate !== undefined) parts.push(`ok>=${+(target.minSuccessRate * 100).toFixed(2)}%`);
  return parts.join(" ") || "-";
}
