// A plugin package's `engines.node` is the Node its worker needs (its dependency tree may need
// more than ours). Only the ">=X.Y.Z" form is used in this repository (the release rules say so).

const MINIMUM = /^>=\s*(\d+)\.(\d+)\.(\d+)$/;

/** The minimum version in a ">=X.Y.Z" range, or null for a range of another form (not checked). */
export function minimumNodeVersion(range: string | undefined): [number, number, number] | null {
  const match = range === undefined ? null : MINIMUM.exec(range.trim());
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : null;
}

/** Whether `version` ("20.20.2" or "v20.20.2") meets a ">=X.Y.Z" range (other forms: true). */
export function nodeSatisfies(range: string | undefined, version: string = process.versions.node): boolean {
  const minimum = minimumNodeVersion(range);
  if (!minimum) return true;
  const have = version
    .replace(/^v/, "")
    .split(".")
    .map((part) => Number.parseInt(part, 10) || 0);
  for (let i = 0; i < 3; i += 1) {
    const a = have[i] ?? 0;
    const b = minimum[i]!;
    if (a !== b) return a > b;
  }
  return true;
}
