import { parseDuration, stringList } from "../cli-args.js";
import { resolveSecretFlags, resolveStoredSecretRefs, withSecrets, type ProviderConfig } from "../config-loader.js";
import { describeError } from "../errors.js";
import { bootId, hostId } from "../host-identity.js";
import { err, out } from "../io.js";
import { LeaseDb, type LeaseRecord } from "../lease-db.js";
import { decideGc, type GcDecision } from "../leases/gc-plan.js";
import { formatLeaseTable, formatTable } from "../leases/format.js";
import { loadLeaseLister, type ListedLease } from "../leases/provider-lister.js";
import { loadProvider, type LoadedProvider } from "../provider-loader.js";
import { BUILTIN_PROVIDERS, cliRepoRoot } from "../provider-resolver.js";
import { ProviderSession } from "../provider-session.js";
import { createSecretRedactor, REDACTED, type SecretRedactor } from "@paperclip-sandbox/kit";
import path from "node:path";
import { loadPluginPackage } from "@paperclip-sandbox/worker-client";
import { existsSync } from "node:fs";

function openDb(values: Record<string, unknown>): LeaseDb {
  return LeaseDb.open(typeof values.db === "string" ? values.db : undefined);
}

/** `leases ls`: what the lease database records (live leases; `--all` adds finished ones). */
export async function leasesLsCommand(values: Record<string, unknown>): Promise<number> {
  const db = openDb(values);
  try {
    const leases = db.list({ includeTerminal: values.all === true });
    if (values.json === true) out(`${JSON.stringify({ db: db.file, leases }, null, 2)}\n`);
    else out(formatLeaseTable(leases));
    return 0;
  } finally {
    db.close();
  }
}

interface GcItem {
  source: "database" | "provider-listing";
  provider: string;
  providerLeaseId: string | null;
  rowId?: string;
  decision: GcDecision;
  result?: "destroyed" | "failed" | "skipped";
  error?: string;
}

interface DestroyTarget {
  item: GcItem;
  pluginDir: string;
  driverKey: string;
  environmentId: string;
  storedConfig: ProviderConfig;
  leaseMetadata?: Record<string, unknown>;
  row?: LeaseRecord;
}

function containsRedacted(value: unknown): boolean {
  if (value === REDACTED) return true;
  if (Array.isArray(value)) return value.some(containsRedacted);
  if (value && typeof value === "object") return Object.values(value).some(containsRedacted);
  return false;
}

/**
 * `leases gc`: destroys, through the provider, leases whose owner is gone or that expired, and
 * (where the provider can list its leases) CLI-labelled leases the database does not know.
 * Anything not created by this machine is a dry run unless `--yes`.
 */
export async function leasesGcCommand(values: Record<string, unknown>): Promise<number> {
  const here = { hostId: hostId(), bootId: bootId() };
  const now = new Date();
  const minAgeMs = typeof values["min-age"] === "string" ? parseDuration("--min-age", values["min-age"]) : 10 * 60_000;
  const policy = {
    now,
    here,
    yes: values.yes === true,
    dryRun: values["dry-run"] === true,
    includeIdle: values["include-idle"] === true,
  };
  const secretFlags = resolveSecretFlags(stringList(values.secret), stringList(values["secret-file"]), undefined);
  const redactor = createSecretRedactor(secretFlags.values.values());
  const db = openDb(values);
  const items: GcItem[] = [];
  const targets: DestroyTarget[] = [];
  const only = typeof values.provider === "string" ? values.provider : undefined;
  const wanted = (driverKey: string, pluginDir: string) =>
    only === undefined || only === driverKey || path.resolve(only) === pluginDir;
  try {
    for (const row of db.list()) {
      if (!wanted(row.provider, row.pluginDir)) continue;
      const decision = decideGc(row, policy);
      const item: GcItem = { source: "database", provider: row.provider, providerLeaseId: row.providerLeaseId, rowId: row.id, decision };
      items.push(item);
      if (decision.action === "destroy") {
        targets.push({
          item,
          pluginDir: row.pluginDir,
          driverKey: row.provider,
          environmentId: row.environmentId,
          storedConfig: row.config,
          leaseMetadata: row.leaseMetadata ?? undefined,
          row,
        });
      }
    }
    await addListedLeases(db, items, targets, policy, minAgeMs, here.hostId, wanted);

    for (const group of groupTargets(targets)) {
      await destroyGroup(group, db, secretFlags, redactor, values.verbose === true);
    }
  } finally {
    db.close();
  }
  report(items, values.json === true);
  return items.some((i) => i.result === "failed") ? 1 : 0;
}

/** Leases the provider lists that the database does not track (or tracks as finished). */
async function addListedLeases(
  db: LeaseDb,
  items: GcItem[],
  targets: DestroyTarget[],
  policy: Parameters<typeof decideGc>[1],
  minAgeMs: number,
  ourHostId: string,
  wanted: (driverKey: string, pluginDir: string) => boolean,
): Promise<void> {
  // Which plugin packages and configs (state locations) to list: those the database saw, plus ours.
  const sources = new Map<string, { pluginDir: string; driverKey: string; config: ProviderConfig; environmentId?: string }>();
  for (const row of db.list({ includeTerminal: true })) {
    const listConfig = typeof row.config.stateDir === "string" ? { stateDir: row.config.stateDir } : {};
    sources.set(`${row.pluginDir}\0${JSON.stringify(listConfig)}`, { pluginDir: row.pluginDir, driverKey: row.provider, config: listConfig });
  }
  for (const [driverKey, relative] of Object.entries(BUILTIN_PROVIDERS)) {
    const pluginDir = path.join(cliRepoRoot(), relative);
    if (existsSync(path.join(pluginDir, "package.json")) && ![...sources.values()].some((s) => s.pluginDir === pluginDir)) {
      sources.set(`${pluginDir}\0{}`, { pluginDir, driverKey, config: {} });
    }
  }
  const ourEnvironmentPrefix = `cli-${ourHostId}`;
  for (const source of sources.values()) {
    if (!wanted(source.driverKey, source.pluginDir)) continue;
    const lister = await loadLeaseLister(source.pluginDir, await pluginIdOf(source.pluginDir));
    if (!lister) continue;
    let listed: ListedLease[];
    try {
      listed = await lister(source.config);
    } catch (error) {
      err(`paperclip-sandbox: cannot list ${source.driverKey} leases: ${describeError(error)}\n`);
      continue;
    }
    for (const lease of listed) {
      const known = db.findByProviderLeaseId(source.driverKey, lease.providerLeaseId);
      if (known.some((row) => row.state !== "released" && row.state !== "destroyed" && row.state !== "lost" && row.state !== "failed")) continue;
      if (lease.ownerAlive) continue; // a live worker holds it (maybe the Paperclip host's)
      const environment = lease.labels["paperclip-environment"] ?? "";
      const ours = environment === ourEnvironmentPrefix;
      const ageMs = lease.createdAt ? policy.now.getTime() - Date.parse(lease.createdAt) : Number.POSITIVE_INFINITY;
      let decision: GcDecision;
      const what = known.length > 0 ? `recorded as ${known[0]!.state} but still present` : "not in the lease database";
      if (ageMs < minAgeMs && !lease.expired) decision = { action: "keep", reason: `${what}; younger than --min-age` };
      else if (policy.dryRun) decision = { action: "dry-run", reason: what };
      else if (!ours && !policy.yes) decision = { action: "dry-run", reason: `${what}; not created by this machine's CLI (use --yes)` };
      else decision = { action: "destroy", reason: `${what}${ours ? "" : " (--yes)"}` };
      const item: GcItem = { source: "provider-listing", provider: source.driverKey, providerLeaseId: lease.providerLeaseId, decision };
      items.push(item);
      if (decision.action === "destroy") {
        targets.push({
          item,
          pluginDir: source.pluginDir,
          driverKey: source.driverKey,
          environmentId: environment || `cli-${ourHostId}`,
          storedConfig: known[0]?.config ?? source.config,
          leaseMetadata: known[0]?.leaseMetadata ?? undefined,
        });
      }
    }
  }
}

async function pluginIdOf(pluginDir: string): Promise<string> {
  try {
    return (await loadPluginPackage(pluginDir)).manifest.id;
  } catch {
    return path.basename(pluginDir);
  }
}

function groupTargets(targets: DestroyTarget[]): DestroyTarget[][] {
  const groups = new Map<string, DestroyTarget[]>();
  for (const t of targets) {
    const key = JSON.stringify([t.pluginDir, t.driverKey, t.environmentId, t.storedConfig]);
    groups.set(key, [...(groups.get(key) ?? []), t]);
  }
  return [...groups.values()];
}

async function destroyGroup(
  group: DestroyTarget[],
  db: LeaseDb,
  secretFlags: ReturnType<typeof resolveSecretFlags>,
  redactor: SecretRedactor,
  verbose: boolean,
): Promise<void> {
  const first = group[0]!;
  const fail = (message: string) => {
    for (const t of group) {
      t.item.result = "failed";
      t.item.error = message;
    }
  };
  let config: ProviderConfig;
  let provider: LoadedProvider;
  try {
    const resolved = resolveStoredSecretRefs(first.storedConfig);
    for (const secret of resolved.secrets) redactor.add(secret);
    config = withSecrets(resolved.config, secretFlags);
    if (containsRedacted(config)) {
      return fail("the stored config has redacted fields: give them with --secret field=ENV_VAR or --secret-file field=PATH");
    }
    provider = await loadProvider(first.pluginDir, first.driverKey);
  } catch (error) {
    return fail(redactor.redact(describeError(error)));
  }
  let session: ProviderSession;
  try {
    session = await ProviderSession.start(provider, { config, environmentId: first.environmentId, redactor, verbose });
  } catch (error) {
    return fail(redactor.redact(describeError(error)));
  }
  try {
    for (const target of group) {
      if (!target.item.providerLeaseId) {
        target.item.result = "skipped";
        target.item.error = "the acquire never returned a provider lease id (the provider cannot list leases by label)";
        continue;
      }
      try {
        await session.destroy({ providerLeaseId: target.item.providerLeaseId, metadata: target.leaseMetadata });
        target.item.result = "destroyed";
        if (target.row) db.setState(target.row.id, "destroyed");
      } catch (error) {
        target.item.result = "failed";
        target.item.error = redactor.redact(describeError(error));
        if (target.row) db.setState(target.row.id, target.row.state, target.item.error);
      }
    }
  } finally {
    await session.close();
  }
}

function report(items: GcItem[], json: boolean): void {
  if (json) {
    out(`${JSON.stringify({ items }, null, 2)}\n`);
    return;
  }
  const acted = items.filter((i) => i.decision.action !== "keep");
  if (acted.length === 0) {
    out(`nothing to clean up (${items.length} lease${items.length === 1 ? "" : "s"} checked)\n`);
    for (const item of items) out(`  kept ${item.provider} ${item.providerLeaseId ?? "-"}: ${item.decision.reason}\n`);
    return;
  }
  out(
    formatTable(
      ["ACTION", "PROVIDER", "PROVIDER LEASE", "SOURCE", "REASON"],
      acted.map((i) => [
        i.decision.action === "dry-run" ? "would destroy" : (i.result ?? "destroy"),
        i.provider,
        i.providerLeaseId ?? "-",
        i.source === "database" ? "db" : "listing",
        i.error ? `${i.decision.reason}: ${i.error}` : i.decision.reason,
      ]),
    ),
  );
  if (acted.some((i) => i.decision.action === "dry-run")) out("dry run for the leases above marked 'would destroy'; pass --yes to destroy them\n");
}

