import { closeSync, mkdirSync, openSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import type { ProcessOwner } from "./host-identity.js";

/**
 * The local record of every lease the CLI acquires, so `leases gc` can find what a crash left behind.
 * Rows are written BEFORE the provider is asked (state `acquiring`), then updated as the lease moves.
 * Nothing secret is stored: configs hold secret references (env var names, file paths), metadata is redacted.
 */
export type LeaseState =
  | "acquiring" // recorded before acquire; provider lease id not known yet
  | "active" // acquired and in use by the owner process
  | "releasing" // release requested
  | "idle" // released but kept by the provider for reuse (resumable)
  | "released" // released with the provider (terminal)
  | "destroyed" // destroyed by gc or bench (terminal)
  | "failed" // acquire failed, nothing to clean up (terminal)
  | "lost"; // the provider reports it gone (terminal)

const LIVE_STATES: readonly LeaseState[] = ["acquiring", "active", "releasing", "idle"];
export const TERMINAL_STATES: readonly LeaseState[] = ["released", "destroyed", "failed", "lost"];

export interface LeaseRecord {
  id: string;
  provider: string;
  pluginDir: string;
  companyId: string;
  environmentId: string;
  runId: string;
  providerLeaseId: string | null;
  leaseMetadata: Record<string, unknown> | null;
  labels: Record<string, string>;
  state: LeaseState;
  reusable: boolean;
  config: Record<string, unknown>;
  configFingerprint: string;
  expiresAt: string | null;
  owner: ProcessOwner;
  purpose: string;
  createdAt: string;
  updatedAt: string;
  lastError: string | null;
}

export type NewLease = Omit<LeaseRecord, "providerLeaseId" | "leaseMetadata" | "state" | "expiresAt" | "createdAt" | "updatedAt" | "lastError">;

function defaultDbPath(env: NodeJS.ProcessEnv = process.env): string {
  const stateHome = env.XDG_STATE_HOME && path.isAbsolute(env.XDG_STATE_HOME) ? env.XDG_STATE_HOME : path.join(os.homedir(), ".local", "state");
  return path.join(stateHome, "paperclip-sandbox", "leases.db");
}

const SCHEMA_V1 = `
CREATE TABLE IF NOT EXISTS leases (
  id TEXT PRIMARY KEY,
  provider TEXT NOT NULL,
  plugin_dir TEXT NOT NULL,
  company_id TEXT NOT NULL,
  environment_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  provider_lease_id TEXT,
  lease_metadata TEXT,
  labels TEXT NOT NULL,
  state TEXT NOT NULL,
  reusable INTEGER NOT NULL DEFAULT 0,
  config TEXT NOT NULL,
  config_fingerprint TEXT NOT NULL,
  expires_at TEXT,
  host_id TEXT NOT NULL,
  boot_id TEXT,
  pid INTEGER NOT NULL,
  pid_start_ticks TEXT,
  purpose TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  last_error TEXT
);
CREATE INDEX IF NOT EXISTS leases_state ON leases(state);
CREATE INDEX IF NOT EXISTS leases_provider_lease ON leases(provider, provider_lease_id);
`;

interface Row {
  id: string;
  provider: string;
  plugin_dir: string;
  company_id: string;
  environment_id: string;
  run_id: string;
  provider_lease_id: string | null;
  lease_metadata: string | null;
  labels: string;
  state: LeaseState;
  reusable: number;
  config: string;
  config_fingerprint: string;
  expires_at: string | null;
  host_id: string;
  boot_id: string | null;
  pid: number;
  pid_start_ticks: string | null;
  purpose: string;
  created_at: string;
  updated_at: string;
  last_error: string | null;
}

function fromRow(row: Row): LeaseRecord {
  return {
    id: row.id,
    provider: row.provider,
    pluginDir: row.plugin_dir,
    companyId: row.company_id,
    environmentId: row.environment_id,
    runId: row.run_id,
    providerLeaseId: row.provider_lease_id,
    leaseMetadata: row.lease_metadata ? (JSON.parse(row.lease_metadata) as Record<string, unknown>) : null,
    labels: JSON.parse(row.labels) as Record<string, string>,
    state: row.state,
    reusable: row.reusable === 1,
    config: JSON.parse(row.config) as Record<string, unknown>,
    configFingerprint: row.config_fingerprint,
    expiresAt: row.expires_at,
    owner: { hostId: row.host_id, bootId: row.boot_id ?? undefined, pid: row.pid, startTicks: row.pid_start_ticks ?? undefined },
    purpose: row.purpose,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lastError: row.last_error,
  };
}

/** Creates the database file (and its directory) owner-only before SQLite opens it. */
function ensurePrivateFile(file: string): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    closeSync(openSync(file, "wx", 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
}

export class LeaseDb {
  readonly file: string;
  readonly #db: Database.Database;

  private constructor(file: string, db: Database.Database) {
    this.file = file;
    this.#db = db;
  }

  static open(file: string = defaultDbPath()): LeaseDb {
    ensurePrivateFile(file);
    const db = new Database(file);
    db.pragma("journal_mode = WAL");
    db.pragma("busy_timeout = 5000");
    db.pragma("synchronous = NORMAL");
    const version = db.pragma("user_version", { simple: true }) as number;
    if (version < 1) {
      db.exec(SCHEMA_V1);
      db.pragma("user_version = 1");
    }
    return new LeaseDb(file, db);
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }

  /** Records a lease before the provider is asked for it. */
  insertAcquiring(lease: NewLease): LeaseRecord {
    const now = new Date().toISOString();
    this.#db
      .prepare(
        `INSERT INTO leases (id, provider, plugin_dir, company_id, environment_id, run_id, labels, state, reusable, config,
           config_fingerprint, host_id, boot_id, pid, pid_start_ticks, purpose, created_at, updated_at)
         VALUES (@id, @provider, @pluginDir, @companyId, @environmentId, @runId, @labels, 'acquiring', @reusable, @config,
           @configFingerprint, @hostId, @bootId, @pid, @startTicks, @purpose, @now, @now)`,
      )
      .run({
        id: lease.id,
        provider: lease.provider,
        pluginDir: lease.pluginDir,
        companyId: lease.companyId,
        environmentId: lease.environmentId,
        runId: lease.runId,
        labels: JSON.stringify(lease.labels),
        reusable: lease.reusable ? 1 : 0,
        config: JSON.stringify(lease.config),
        configFingerprint: lease.configFingerprint,
        hostId: lease.owner.hostId,
        bootId: lease.owner.bootId ?? null,
        pid: lease.owner.pid,
        startTicks: lease.owner.startTicks ?? null,
        purpose: lease.purpose,
        now,
      });
    return this.get(lease.id)!;
  }

  /** The provider answered the acquire (or resume): store its id, metadata and expiry. */
  markActive(id: string, lease: { providerLeaseId: string | null; metadata: Record<string, unknown> | null; expiresAt: string | null }, owner?: ProcessOwner): void {
    this.#db
      .prepare(
        `UPDATE leases SET state = 'active', provider_lease_id = @providerLeaseId, lease_metadata = @metadata, expires_at = @expiresAt,
           host_id = COALESCE(@hostId, host_id), boot_id = COALESCE(@bootId, boot_id), pid = COALESCE(@pid, pid),
           pid_start_ticks = COALESCE(@startTicks, pid_start_ticks), updated_at = @now, last_error = NULL WHERE id = @id`,
      )
      .run({
        id,
        providerLeaseId: lease.providerLeaseId,
        metadata: lease.metadata ? JSON.stringify(lease.metadata) : null,
        expiresAt: lease.expiresAt,
        hostId: owner?.hostId ?? null,
        bootId: owner?.bootId ?? null,
        pid: owner?.pid ?? null,
        startTicks: owner?.startTicks ?? null,
        now: new Date().toISOString(),
      });
  }

  setState(id: string, state: LeaseState, lastError: string | null = null): void {
    this.#db.prepare(`UPDATE leases SET state = @state, last_error = @lastError, updated_at = @now WHERE id = @id`).run({ id, state, lastError, now: new Date().toISOString() });
  }

  get(id: string): LeaseRecord | undefined {
    const row = this.#db.prepare(`SELECT * FROM leases WHERE id = ?`).get(id) as Row | undefined;
    return row ? fromRow(row) : undefined;
  }

  list(options: { includeTerminal?: boolean } = {}): LeaseRecord[] {
    const sql = options.includeTerminal
      ? `SELECT * FROM leases ORDER BY created_at, id`
      : `SELECT * FROM leases WHERE state IN (${LIVE_STATES.map((s) => `'${s}'`).join(", ")}) ORDER BY created_at, id`;
    return (this.#db.prepare(sql).all() as Row[]).map(fromRow);
  }

  findByProviderLeaseId(provider: string, providerLeaseId: string): LeaseRecord[] {
    return (this.#db.prepare(`SELECT * FROM leases WHERE provider = ? AND provider_lease_id = ?`).all(provider, providerLeaseId) as Row[]).map(fromRow);
  }

  /** The newest idle (resumable) lease for this provider and config, not expired. */
  findIdleReusable(provider: string, pluginDir: string, configFingerprint: string, now = new Date()): LeaseRecord | undefined {
    const rows = this.#db
      .prepare(
        `SELECT * FROM leases WHERE provider = ? AND plugin_dir = ? AND config_fingerprint = ? AND state = 'idle' AND reusable = 1
         ORDER BY updated_at DESC`,
      )
      .all(provider, pluginDir, configFingerprint) as Row[];
    return rows.map(fromRow).find((r) => !r.expiresAt || Date.parse(r.expiresAt) > now.getTime());
  }

  /** Atomically claims an idle lease for a new owner; false when someone else claimed it first. */
  claimIdle(id: string, owner: ProcessOwner): boolean {
    const result = this.#db
      .prepare(
        `UPDATE leases SET state = 'active', host_id = @hostId, boot_id = @bootId, pid = @pid, pid_start_ticks = @startTicks, updated_at = @now
         WHERE id = @id AND state = 'idle'`,
      )
      .run({ id, hostId: owner.hostId, bootId: owner.bootId ?? null, pid: owner.pid, startTicks: owner.startTicks ?? null, now: new Date().toISOString() });
    return result.changes === 1;
  }
}
