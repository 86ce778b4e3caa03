import { getSandbox } from "@cloudflare/sandbox";
import { DurableObject } from "cloudflare:workers";
import type { Env } from "./env.js";

/** One lease the bridge made, as `GET /leases` lists it. */
export interface LeaseRecord {
  providerLeaseId: string;
  labels: Record<string, string>;
  createdAt: string;
  keepAlive: boolean;
  /** When the bridge destroys the sandbox by itself (an alarm), if the client asked for a bound. */
  expiresAt?: string | null;
}

/**
 * The bridge's list of its sandboxes and their labels (Durable Objects cannot be enumerated): one
 * SQLite-backed instance, written at acquire and destroy, read by `leases gc`.
 */
export class LeaseRegistry extends DurableObject<Env> {
  private ready = false;

  private table(): void {
    if (this.ready) return;
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS leases (id TEXT PRIMARY KEY, labels TEXT NOT NULL, created_at TEXT NOT NULL, keep_alive INTEGER NOT NULL, expires_at TEXT)");
    this.ready = true;
  }

  async put(record: LeaseRecord): Promise<void> {
    this.table();
    this.ctx.storage.sql.exec(
      "INSERT INTO leases (id, labels, created_at, keep_alive, expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET labels = excluded.labels, keep_alive = excluded.keep_alive, expires_at = excluded.expires_at",
      record.providerLeaseId,
      JSON.stringify(record.labels),
      record.createdAt,
      record.keepAlive ? 1 : 0,
      record.expiresAt ?? null,
    );
    await this.armAlarm();
  }

  /** The next expiry, as the Durable Object's alarm. */
  private async armAlarm(): Promise<void> {
    const [row] = this.ctx.storage.sql.exec("SELECT MIN(expires_at) AS next FROM leases WHERE expires_at IS NOT NULL").toArray();
    const next = row?.next ? Date.parse(String(row.next)) : Number.NaN;
    if (Number.isFinite(next)) await this.ctx.storage.setAlarm(next);
    else await this.ctx.storage.deleteAlarm();
  }

  /** Destroys every sandbox whose expiry has come (a lease bounded by the host's requested deadline). */
  override async alarm(): Promise<void> {
    this.table();
    const due = this.ctx.storage.sql.exec("SELECT id FROM leases WHERE expires_at IS NOT NULL AND expires_at <= ?", new Date().toISOString()).toArray();
    for (const row of due) {
      const id = String(row.id);
      // Out of the registry first, so a late call for it is refused rather than booting a container.
      this.ctx.storage.sql.exec("DELETE FROM leases WHERE id = ?", id);
      try {
        await getSandbox(this.env.Sandbox, id).destroy();
      } catch {
        // gone is what an expiry wants
      }
    }
    await this.armAlarm();
  }

  async remove(providerLeaseId: string): Promise<void> {
    this.table();
    this.ctx.storage.sql.exec("DELETE FROM leases WHERE id = ?", providerLeaseId);
  }

  async get(providerLeaseId: string): Promise<LeaseRecord | null> {
    this.table();
    const [row] = this.ctx.storage.sql.exec("SELECT id, labels, created_at, keep_alive, expires_at FROM leases WHERE id = ?", providerLeaseId).toArray();
    return row ? toRecord(row) : null;
  }

  /** The leases carrying every one of `labels`. */
  async list(labels: Record<string, string>): Promise<LeaseRecord[]> {
    this.table();
    return this.ctx.storage.sql
      .exec("SELECT id, labels, created_at, keep_alive, expires_at FROM leases ORDER BY created_at")
      .toArray()
      .map(toRecord)
      .filter((record) => Object.entries(labels).every(([key, value]) => record.labels[key] === value));
  }
}

function toRecord(row: Record<string, SqlStorageValue>): LeaseRecord {
  return {
    providerLeaseId: String(row.id),
    labels: JSON.parse(String(row.labels)) as Record<string, string>,
    createdAt: String(row.created_at),
    keepAlive: row.keep_alive === 1,
    expiresAt: row.expires_at ? String(row.expires_at) : null,
  };
}

export const registryOf = (ns: DurableObjectNamespace<LeaseRegistry>) => ns.get(ns.idFromName("leases"));
