// The one statistics helper every bench uses: medians and tails of timing samples (ms).

/**
 * Value at quantile q (0..1) of ascending `sorted`, nearest rank.
 * @param {number[]} sorted
 * @param {number} q
 */
function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/**
 * n, median (the mean of the middle two for even n), p95, mean, min and max of `samples`.
 * @param {number[]} samples
 */
export function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const mean = sorted.reduce((sum, v) => sum + v, 0) / sorted.length;
  return { n: sorted.length, median, p95: quantile(sorted, 0.95), mean, min: sorted[0], max: sorted.at(-1) };
}

/** Three decimals: what the benches print. @param {number} v */
export const round = (v) => Math.round(v * 1000) / 1000;
