import type { MetricTarget } from "./targets.js";

const BLOCKS = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

/** Counts of `values` in `bins` equal-width bins from min to max. */
function histogram(values: readonly number[], bins: number): { min: number; max: number; counts: number[] } {
  const counts = new Array<number>(bins).fill(0);
  if (values.length === 0) return { min: 0, max: 0, counts };
  const min = Math.min(...values);
  const max = Math.max(...values);
  const width = max - min || 1;
  for (const v of values) counts[Math.min(bins - 1, Math.floor(((v - min) / width) * bins))]! += 1;
  return { min, max, counts };
}

/** A one-line terminal histogram, e.g. `12ms ▁▃█▅▂▁ 40ms`. */
export function sparkline(values: readonly number[], bins = 16): string {
  if (values.length === 0) return "(no successful samples)";
  const { min, max, counts } = histogram(values, bins);
  const top = Math.max(...counts);
  const bars = counts.map((c) => (c === 0 ? " " : BLOCKS[Math.min(BLOCKS.length - 1, Math.floor((c / top) * (BLOCKS.length - 1)))]!)).join("");
  return `${fmt(min)} ${bars} ${fmt(max)}`;
}

function fmt(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)}s` : `${ms.toFixed(ms < 10 ? 1 : 0)}ms`;
}

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c]!);
}

export interface ChartSeries {
  label: string;
  verdict: string;
  values: number[];
  target: MetricTarget;
}

/** A small SVG: one latency histogram per metric, with its p50/p95 targets as dashed lines when in range. */
export function latencySvg(title: string, series: readonly ChartSeries[]): string {
  const width = 720;
  const panel = 110;
  const left = 190;
  const plotWidth = width - left - 20;
  const bins = 30;
  const height = 40 + series.length * panel;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="22" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
  ];
  series.forEach((s, index) => {
    const top = 40 + index * panel;
    const plotHeight = panel - 35;
    const color = s.verdict === "PASS" ? "#2e7d32" : s.verdict === "FAIL" ? "#c62828" : "#9e9e9e";
    parts.push(`<text x="10" y="${top + 20}" font-weight="bold">${escapeXml(s.label)}</text>`);
    parts.push(`<text x="10" y="${top + 36}" fill="${color}">${escapeXml(s.verdict)} (n=${s.values.length})</text>`);
    parts.push(`<line x1="${left}" y1="${top + plotHeight}" x2="${left + plotWidth}" y2="${top + plotHeight}" stroke="#555"/>`);
    if (s.values.length === 0) {
      parts.push(`<text x="${left + 10}" y="${top + plotHeight / 2}" fill="#777">no successful samples</text>`);
      return;
    }
    const { counts } = histogram(s.values, bins);
    const candidates = [s.target.p50Ms, s.target.p95Ms].filter((t): t is number => t !== undefined);
    const rawMax = Math.max(...s.values);
    const upper = Math.max(rawMax, ...candidates.filter((t) => t <= rawMax * 4)) || 1;
    const min = Math.min(...s.values);
    const scaleMax = upper;
    const x = (v: number) => left + ((v - min) / (scaleMax - min || 1)) * plotWidth;
    const top2 = Math.max(...counts);
    const binWidth = (rawMax - min || 1) / bins;
    counts.forEach((c, b) => {
      if (c === 0) return;
      const x0 = x(min + b * binWidth);
      const x1 = x(min + (b + 1) * binWidth);
      const h = (c / top2) * (plotHeight - 5);
      parts.push(
        `<rect x="${x0.toFixed(1)}" y="${(top + plotHeight - h).toFixed(1)}" width="${Math.max(1, x1 - x0 - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${color}" opacity="0.8"><title>${c} samples</title></rect>`,
      );
    });
    for (const [name, t] of [
      ["p50 target", s.target.p50Ms],
      ["p95 target", s.target.p95Ms],
    ] as const) {
      if (t === undefined || t > scaleMax) continue;
      parts.push(`<line x1="${x(t).toFixed(1)}" y1="${top}" x2="${x(t).toFixed(1)}" y2="${top + plotHeight}" stroke="#000" stroke-dasharray="4 3"/>`);
      parts.push(`<text x="${(x(t) + 3).toFixed(1)}" y="${top + 10}" fill="#000">${name}</text>`);
    }
    parts.push(`<text x="${left}" y="${top + plotHeight + 14}">${fmt(min)}</text>`);
    parts.push(`<text x="${left + plotWidth}" y="${top + plotHeight + 14}" text-anchor="end">${fmt(scaleMax)}</text>`);
  });
  parts.push("</svg>\n");
  return parts.join("\n");
}
