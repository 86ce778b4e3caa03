import { createSecretRedactor, labelValue, type SecretRedactor } from "@paperclip-sandbox/kit";
import path from "node:path";
import { parseDuration, stringList } from "../cli-args.js";
import { applySetFlags, readConfigFile, resolveSecretFlags, resolveStoredSecretRefs, withSecrets, type ProviderConfig } from "../config-loader.js";
import { describeError, UsageError } from "../errors.js";
import { bootId, hostId, ownerStatus } from "../host-identity.js";
import { err, out } from "../io.js";
import { LeaseDb, type LeaseRecord } from "../lease-db.js";
import { decideGc, type GcDecision } from "../leases/gc-plan.js";
import { formatLeaseTable, formatTable } from "../leases/format.js";
import { decideListedLease } from "../leases/listed-plan.js";
import { containsRedacted, listingSources, type ListingSource } from "../leases/listing-sources.js";
import { LIST_TIMEOUT_MS, type ListedLease } from "../leases/provider-lister.js";
import { loadProvider, type LoadedProvider } from "../provider-loader.js";
import { CLI_COMPANY_ID, ProviderSession } from "../provider-session.js";

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

/** A lease to destroy, with the params the plugin's `environmentDestroyLease` hook gets (as the host sends them). */
interface DestroyTarget {
  item: GcItem;
  pluginDir: string;
  driverKey: string;
  companyId: string;
  environmentId: string;
  /** Stored (secret references) or, for a contract listing, the config it was listed with. */
  config: ProviderConfig;
  leaseMetadata?: Record<string, unknown>;
  row?: LeaseRecord;
}

/**
 * `leases gc`: destroys, through the provider, leases whose owner is gone or that expired, and
 * (where the provider can list its leases: at the vendor, by label) leases the database does not
 * know. Anything not created by this machine is a dry run unless `--yes`.
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
  const only = typeof values.provider === "string" ? values.provider : undefined;
  if (only === undefined && (values.config !== undefined || stringList(values.set).length > 0)) {
    throw new UsageError("leases gc: --config and --set need --provider (the config is for that provider's listing)");
  }
  const named = only === undefined ? undefined : await namedProvider(only, values);
  const secretFlags = resolveSecretFlags(stringList(values.secret), stringList(values["secret-file"]), named?.configSchema);
  const redactor = createSecretRedactor(secretFlags.values.values());
  const fromFile = typeof values.config === "string" ? readConfigFile(values.config) : {};
  const baseConfig = named ? applySetFlags(fromFile, stringList(values.set), named.configSchema) : {};
  const db = openDb(values);
  const items: GcItem[] = [];
  const targets: DestroyTarget[] = [];
  const skipped = new Map<string, string>();
  const wanted = (driverKey: string, pluginDir: string) =>
    only === undefined || (named !== undefined && pluginDir === named.resolved.pluginDir) || only === driverKey || path.resolve(only) === pluginDir;
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
          companyId: row.companyId,
          environmentId: row.environmentId,
          config: row.config,
          leaseMetadata: row.leaseMetadata ?? undefined,
          row,
        });
      }
    }
    const sources = await listingSources({
      rows: db.list({ includeTerminal: true }),
      named: named && { pluginDir: named.resolved.pluginDir, driverKey: named.driverKey },
      baseConfig,
      secretFlags,
      redactor,
      wanted,
      warn: (message) => err(`paperclip-sandbox: ${message}\n`),
      skipped: (driverKey, reason) => skipped.set(driverKey, reason),
    });
    // Said once, grouped by reason: what gc did not look at, and how to make it.
    for (const reason of new Set(skipped.values())) {
      const names = [...skipped].filter(([, r]) => r === reason).map(([name]) => name);
      err(`paperclip-sandbox: leases gc: skipped ${names.join(", ")}: ${reason}\n`);
    }
    for (const source of sources) await addListedLeases(source, db, items, targets, { ...policy, minAgeMs, ourHostId: here.hostId }, redactor);

    for (const group of groupTargets(targets)) {
      await destroyGroup(group, db, secretFlags, redactor, values.verbose === true);
    }
  } finally {
    db.close();
  }
  report(items, values.json === true, [...skipped.keys()]);
  return items.some((i) => i.result === "failed") ? 1 : 0;
}

/**
 * The plugin `--provider` names, to list it even when the database has never seen it. A bare name
 * we do not ship may still be a driverKey the database knows: then only its rows are matched.
 */
async function namedProvider(spec: string, values: Record<string, unknown>): Promise<LoadedProvider | undefined> {
  try {
    return await loadProvider(spec, undefined);
  } catch (error) {
    const needsIt = values.config !== undefined || stringList(values.set).length > 0 || spec.includes("/") || spec.startsWith(".");
    if (needsIt || !(error instanceof UsageError)) throw error;
    return undefined;
  }
}

/** Lists one plugin's leases (with each of its configs) and plans what to do with each. */
async function addListedLeases(
  source: ListingSource,
  db: LeaseDb,
  items: GcItem[],
  targets: DestroyTarget[],
  policy: { now: Date; yes: boolean; dryRun: boolean; minAgeMs: number; ourHostId: string },
  redactor: SecretRedactor,
): Promise<void> {
  const ourEnvironment = labelValue(`cli-${policy.ourHostId}`);
  const seen = new Set<string>();
  for (const config of source.configs) {
    let listed: ListedLease[];
    try {
      listed = await listWithDeadline(source, config);
    } catch (error) {
      err(`paperclip-sandbox: cannot list ${source.driverKey} leases: ${redactor.redact(describeError(error))}\n`);
      continue;
    }
    for (const lease of listed) {
      if (seen.has(lease.providerLeaseId)) continue; // two configs reaching the same vendor account
      seen.add(lease.providerLeaseId);
      const known = db.findByProviderLeaseId(source.driverKey, lease.providerLeaseId);
      const decision = decideListedLease(lease, {
        driverKey: source.driverKey,
        requireProviderLabel: source.lister.kind === "contract",
        known,
        alreadyTargeted: targets.some((t) => t.driverKey === source.driverKey && t.item.providerLeaseId === lease.providerLeaseId),
        now: policy.now,
        minAgeMs: policy.minAgeMs,
        yes: policy.yes,
        dryRun: policy.dryRun,
        ourEnvironment,
        ourCompany: labelValue(CLI_COMPANY_ID),
        statusOf: (row) => ownerStatus(row.owner),
      });
      if (!decision) continue;
      const item: GcItem = { source: "provider-listing", provider: source.driverKey, providerLeaseId: lease.providerLeaseId, decision };
      items.push(item);
      if (decision.action !== "destroy") continue;
      targets.push({
        item,
        pluginDir: source.pluginDir,
        driverKey: source.driverKey,
        // The lease's own company and environment, as the host would send them for it.
        companyId: lease.labels["paperclip-company"] ?? known[0]?.companyId ?? CLI_COMPANY_ID,
        environmentId: lease.labels["paperclip-environment"] || known[0]?.environmentId || `cli-${policy.ourHostId}`,
        config: source.lister.kind === "contract" ? config : (known[0]?.config ?? config),
        leaseMetadata: lease.metadata ?? known[0]?.leaseMetadata ?? undefined,
      });
    }
  }
}

/** A listing that hangs must not hang gc: it gets a signal, and is abandoned at the deadline. */
async function listWithDeadline(source: ListingSource, config: ProviderConfig): Promise<ListedLease[]> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`no answer within ${LIST_TIMEOUT_MS / 1000} s`));
    }, LIST_TIMEOUT_MS);
  });
  try {
    return await Promise.race([source.lister.list(config, { signal: controller.signal }), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

function groupTargets(targets: DestroyTarget[]): DestroyTarget[][] {
  const groups = new Map<string, DestroyTarget[]>();
  for (const t of targets) {
    const key = JSON.stringify([t.pluginDir, t.driverKey, t.companyId, t.environmentId, t.config]);
    groups.set(key, [...(groups.get(key) ?? []), t]);
  }
  return [...groups.values()];
}

/** One worker per group; each lease is destroyed through the plugin's `environmentDestroyLease` hook. */
async function destroyGroup(group: DestroyTarget[], db: LeaseDb, secretFlags: ReturnType<typeof resolveSecretFlags>, redactor: SecretRedactor, verbose: boolean): Promise<void> {
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
    const resolved = resolveStoredSecretRefs(first.config);
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
        await session.client.env.destroyLease({
          driverKey: first.driverKey,
          companyId: first.companyId,
          environmentId: first.environmentId,
          config,
          providerLeaseId: target.item.providerLeaseId,
          leaseMetadata: target.leaseMetadata,
          cancelActiveWork: true,
        });
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

function report(items: GcItem[], json: boolean, skipped: string[]): void {
  if (json) {
    out(`${JSON.stringify({ items, skipped }, null, 2)}\n`);
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
