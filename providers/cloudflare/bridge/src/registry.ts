import { DurableObject } from "cloudflare:workers";

/** One lease the bridge made, as `GET /leases` lists it. */
export interface LeaseRecord {
  providerLeaseId: string;
  labels: Record<string, string>;
  createdAt: string;
  keepAlive: boolean;
}

/**
 * The bridge's list of its sandboxes and their labels (Durable Objects cannot be enumerated): one
 * SQLite-backed instance, written at acquire and destroy, read by `leases gc`.
 */
export class LeaseRegistry extends DurableObject {
  private ready = false;

  private table(): void {
    if (this.ready) return;
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS leases (id TEXT PRIMARY KEY, labels TEXT NOT NULL, created_at TEXT NOT NULL, keep_alive INTEGER NOT NULL)");
    this.ready = true;
  }

  async put(record: LeaseRecord): Promise<void> {
    this.table();
    this.ctx.storage.sql.exec(
      "INSERT INTO leases (id, labels, created_at, keep_alive) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET labels = excluded.labels, keep_alive = excluded.keep_alive",
      record.providerLeaseId,
      JSON.stringify(record.labels),
      record.createdAt,
      record.keepAlive ? 1 : 0,
    );
  }

  async remove(providerLeaseId: string): Promise<void> {
    this.table();
    this.ctx.storage.sql.exec("DELETE FROM leases WHERE id = ?", providerLeaseId);
  }

  async get(providerLeaseId: string): Promise<LeaseRecord | null> {
    this.table();
    const [row] = this.ctx.storage.sql.exec("SELECT id, labels, created_at, keep_alive FROM leases WHERE id = ?", providerLeaseId).toArray();
    return row ? toRecord(row) : null;
  }

  /** The leases carrying every one of `labels`. */
  async list(labels: Record<string, string>): Promise<LeaseRecord[]> {
    this.table();
    return this.ctx.storage.sql
      .exec("SELECT id, labels, created_at, keep_alive FROM leases ORDER BY created_at")
      .toArray()
      .map(toRecord)
      .filter((record) => Object.entries(labels).every(([key, value]) => record.labels[key] === value));
  }
}

function toRecord(row: Record<string, SqlStorageValue>): LeaseRecord {
  return { providerLeaseId: String(row.id), labels: JSON.parse(String(row.labels)) as Record<string, string>, createdAt: String(row.created_at), keepAlive: row.keep_alive === 1 };
}

export const registryOf = (ns: DurableObjectNamespace<LeaseRegistry>) => ns.get(ns.idFromName("leases"));
