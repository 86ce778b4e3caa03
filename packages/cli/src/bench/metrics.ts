import type { MetricTarget } from "./targets.js";

/**
 * One measurement. `unverifiable`: the provider cannot show this metric (no reusable leases, the
 * probe command failed, printed nothing or was not found); it never counts as a success.
 */
export interface Sample {
  i: number;
  ms: number | null;
  outcome: "ok" | "failed" | "unverifiable";
  note?: string;
}

export type Verdict = "PASS" | "FAIL" | "UNVERIFIED";

export interface MetricSummary {
  count: number;
  ok: number;
  failed: number;
  unverifiable: number;
  /** ok / (ok + failed); null when nothing was measurable. */
  successRate: number | null;
  p50Ms: number | null;
  p95Ms: number | null;
  minMs: number | null;
  maxMs: number | null;
  verdict: Verdict;
  reasons: string[];
}

/** Nearest-rank percentile of sorted values (p in 0..100). */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function summarize(samples: readonly Sample[], target: MetricTarget): MetricSummary {
  const ok = samples.filter((s) => s.outcome === "ok");
  const failed = samples.filter((s) => s.outcome === "failed").length;
  const unverifiable = samples.length - ok.length - failed;
  const latencies = ok.map((s) => s.ms!).sort((a, b) => a - b);
  const measured = ok.length + failed;
  const successRate = measured > 0 ? ok.length / measured : null;
  const p50Ms = percentile(latencies, 50);
  const p95Ms = percentile(latencies, 95);
  const reasons: string[] = [];
  if (target.minSuccessRate !== undefined && successRate !== null && successRate < target.minSuccessRate) {
    reasons.push(`success ${(successRate * 100).toFixed(1)}% < ${(target.minSuccessRate * 100).toFixed(1)}%`);
  }
  if (target.p50Ms !== undefined && p50Ms !== null && p50Ms > target.p50Ms) reasons.push(`p50 ${p50Ms.toFixed(0)} ms > ${target.p50Ms} ms`);
  if (target.p95Ms !== undefined && p95Ms !== null && p95Ms > target.p95Ms) reasons.push(`p95 ${p95Ms.toFixed(0)} ms > ${target.p95Ms} ms`);
  let verdict: Verdict;
  if (reasons.length > 0) verdict = "FAIL";
  else if (samples.length === 0 || ok.length === 0 || unverifiable > 0) {
    verdict = "UNVERIFIED";
    const notes = [
      ...new Set(
        samples
          .filter((s) => s.outcome === "unverifiable")
          .map((s) => s.note)
          .filter(Boolean),
      ),
    ];
    reasons.push(unverifiable > 0 ? `${unverifiable} of ${samples.length} samples unverifiable${notes.length ? `: ${notes.slice(0, 2).join("; ")}` : ""}` : "no samples");
  } else verdict = "PASS";
  return {
    count: samples.length,
    ok: ok.length,
    failed,
    unverifiable,
    successRate,
    p50Ms,
    p95Ms,
    minMs: latencies[0] ?? null,
    maxMs: latencies[latencies.length - 1] ?? null,
    verdict,
    reasons,
  };
}

/** FAIL beats UNVERIFIED beats PASS. */
export function overallVerdict(verdicts: readonly Verdict[]): Verdict {
  if (verdicts.includes("FAIL")) return "FAIL";
  if (verdicts.includes("UNVERIFIED") || verdicts.length === 0) return "UNVERIFIED";
  return "PASS";
}

export function verdictExitCode(verdict: Verdict): number {
  return verdict === "PASS" ? 0 : verdict === "FAIL" ? 1 : 2;
}
