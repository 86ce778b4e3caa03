import type { LeaseRecord } from "../lease-db.js";
import { ownerStatus } from "../host-identity.js";

/** Fixed-width text table; the last column is not padded. */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n") + "\n";
}

function age(iso: string, now: Date): string {
  const s = Math.max(0, Math.round((now.getTime() - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

function until(iso: string | null, now: Date): string {
  if (!iso) return "-";
  const ms = Date.parse(iso) - now.getTime();
  return ms <= 0 ? "expired" : `in ${age(new Date(now.getTime() - ms).toISOString(), now)}`;
}

export function formatLeaseTable(leases: LeaseRecord[], now = new Date()): string {
  if (leases.length === 0) return "no leases\n";
  return formatTable(
    ["ID", "PROVIDER", "STATE", "PROVIDER LEASE", "AGE", "EXPIRES", "OWNER", "PURPOSE"],
    leases.map((l) => {
      const status = ownerStatus(l.owner);
      return [
        l.id.slice(0, 8),
        l.provider,
        l.state,
        l.providerLeaseId ?? "-",
        age(l.createdAt, now),
        until(l.expiresAt, now),
        `pid ${l.owner.pid} (${status === "unknown" ? "other host" : status})`,
        l.purpose,
      ];
    }),
  );
}
