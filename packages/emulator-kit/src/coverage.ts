/**
 * Operation coverage: what an emulator serves of its vendor's SDK, per operation of the SDK's
 * generated client (or `.proto`). An emulator declares it once; its fidelity test checks the
 * declaration against the operations it reads from the installed SDK and its README's table.
 */
export type CoverageStatus = "served" | "refused" | "not yet";

export interface CoverageEntry {
  status: CoverageStatus;
  /** Why it is refused (required for "refused"), or what "served" leaves out. */
  reason?: string;
}

/** One operation of the SDK: its group (generated API class, proto service) and name. */
export interface SdkOperation {
  group: string;
  name: string;
  /** `POST /files/folder`, `/pkg.Service/Method`: shown in the table when known. */
  route?: string;
}

export interface CoverageSpec {
  /** `group.name` → entry. */
  operations: Record<string, CoverageEntry>;
  /** Whole groups refused with one reason (account administration, ...): one table row each. */
  refusedGroups?: Record<string, string>;
}

export interface CoverageReport {
  rows: Array<SdkOperation & CoverageEntry>;
  /** Refused groups with the number of SDK operations in each. */
  groups: Array<{ group: string; count: number; reason: string }>;
  /** SDK operations the spec does not classify (a newer SDK, a forgotten one). */
  unclassified: SdkOperation[];
  /** Spec entries no SDK operation has (a renamed or removed one). */
  stale: string[];
  counts: Record<CoverageStatus, number>;
}

const key = (op: SdkOperation) => `${op.group}.${op.name}`;

/** Classifies every SDK operation by the spec. */
export function coverageReport(spec: CoverageSpec, operations: readonly SdkOperation[]): CoverageReport {
  const rows: CoverageReport["rows"] = [];
  const groupCounts = new Map<string, number>();
  const unclassified: SdkOperation[] = [];
  const seen = new Set<string>();
  const counts: Record<CoverageStatus, number> = { served: 0, refused: 0, "not yet": 0 };
  for (const op of operations) {
    const groupReason = spec.refusedGroups?.[op.group];
    const entry = spec.operations[key(op)];
    if (entry) {
      seen.add(key(op));
      rows.push({ ...op, ...entry });
      counts[entry.status] += 1;
    } else if (groupReason !== undefined) {
      groupCounts.set(op.group, (groupCounts.get(op.group) ?? 0) + 1);
      counts.refused += 1;
    } else unclassified.push(op);
  }
  const stale = Object.keys(spec.operations).filter((name) => !seen.has(name));
  const groups = [...groupCounts].map(([group, count]) => ({ group, count, reason: spec.refusedGroups![group]! }));
  return { rows, groups, unclassified, stale, counts };
}

const cell = (text: string | undefined) => (text ?? "").replace(/\|/g, "\\|").replace(/\n/g, " ");

/** The README table: one row per classified operation, then one per refused group. */
export function coverageTable(report: CoverageReport): string {
  const lines = ["| group | operation | route | status | note |", "|---|---|---|---|---|"];
  for (const row of report.rows) lines.push(`| ${cell(row.group)} | ${cell(row.name)} | ${row.route ? `\`${cell(row.route)}\`` : ""} | ${row.status} | ${cell(row.reason)} |`);
  for (const group of report.groups) lines.push(`| ${cell(group.group)} | all ${group.count} operations | | refused | ${cell(group.reason)} |`);
  const { served, refused } = report.counts;
  lines.push("", `${served} served, ${refused} refused on purpose, ${report.counts["not yet"]} not yet (of ${served + refused + report.counts["not yet"]} SDK operations).`);
  return lines.join("\n");
}

/** Replaces the README's generated table between `<!-- coverage:start -->` and `<!-- coverage:end -->`. */
export function withCoverageTable(readme: string, table: string): string {
  const start = "<!-- coverage:start -->";
  const end = "<!-- coverage:end -->";
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < from) throw new Error(`README: no ${start} ... ${end} markers for the coverage table`);
  return `${readme.slice(0, from + start.length)}\n${table}\n${readme.slice(to)}`;
}
