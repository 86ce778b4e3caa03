import { existsSync } from "node:fs";
import path from "node:path";
import { canonicalJson, REDACTED, SECRET_REF_FORMAT, type SecretRedactor } from "@paperclip-sandbox/kit";
import { loadPluginPackage } from "@paperclip-sandbox/worker-client";
import { resolveStoredSecretRefs, withSecrets, type ProviderConfig, type ResolvedSecrets } from "../config-loader.js";
import { describeError } from "../errors.js";
import type { LeaseRecord } from "../lease-db.js";
import { BUILTIN_PROVIDERS, cliRepoRoot } from "../provider-resolver.js";
import { loadLeaseLister, type LeaseLister } from "./provider-lister.js";

/** One plugin package to list, with the configs (credentials, state locations) to list it with. */
export interface ListingSource {
  pluginDir: string;
  driverKey: string;
  lister: LeaseLister;
  configs: ProviderConfig[];
}

export interface ListingInputs {
  rows: LeaseRecord[];
  /** The plugin `--provider` named, when it did. */
  named?: { pluginDir: string; driverKey: string };
  /** `--config`/`--set` for the named plugin (or `{}`), before `--secret` flags. */
  baseConfig: ProviderConfig;
  secretFlags: ResolvedSecrets;
  redactor: SecretRedactor;
  wanted(driverKey: string, pluginDir: string): boolean;
  /** Told about a config that cannot be used (a stored secret that cannot be read back…). */
  warn(message: string): void;
  /** Told about a provider not listed because nothing here configures it (it is not contacted). */
  skipped?(driverKey: string, reason: string): void;
}

export function containsRedacted(value: unknown): boolean {
  if (value === REDACTED) return true;
  if (Array.isArray(value)) return value.some(containsRedacted);
  if (value && typeof value === "object") return Object.values(value).some(containsRedacted);
  return false;
}

/**
 * Which plugins to list and with what: those the database saw, the one `--provider` names, and our
 * built-in ones. A state-dir lister gets each `stateDir` the database saw; a contract lister gets
 * each full config the database saw (stored secret references read back, `--secret` flags on top)
 * plus the command line's.
 */
export async function listingSources(inputs: ListingInputs): Promise<ListingSource[]> {
  const plugins = new Map<string, { pluginDir: string; driverKey: string; rows: LeaseRecord[]; base: boolean }>();
  const add = (pluginDir: string, driverKey: string, base: boolean) => {
    const key = `${pluginDir}\0${driverKey}`;
    const entry = plugins.get(key) ?? { pluginDir, driverKey, rows: [], base: false };
    entry.base ||= base;
    plugins.set(key, entry);
    return entry;
  };
  for (const row of inputs.rows) add(row.pluginDir, row.provider, false).rows.push(row);
  if (inputs.named) add(inputs.named.pluginDir, inputs.named.driverKey, true);
  for (const [driverKey, relative] of Object.entries(BUILTIN_PROVIDERS)) {
    const pluginDir = path.join(cliRepoRoot(), relative);
    if (existsSync(path.join(pluginDir, "package.json")) && ![...plugins.values()].some((p) => p.pluginDir === pluginDir)) add(pluginDir, driverKey, true);
  }

  const sources: ListingSource[] = [];
  for (const plugin of plugins.values()) {
    if (!inputs.wanted(plugin.driverKey, plugin.pluginDir)) continue;
    // A built-in provider nobody named and the database never saw gets an empty config, and the
    // worker's environment carries no credentials: a provider that needs them could only fail, after
    // contacting its vendor (DNS included). It is skipped, and said so.
    const manifest = await manifestOf(plugin.pluginDir);
    if (plugin.rows.length === 0 && inputs.named?.pluginDir !== plugin.pluginDir && needsCredentials(manifest, plugin.driverKey)) {
      inputs.skipped?.(plugin.driverKey, "not configured here (no lease of it in the lease database, and its credentials come only with --provider and --config/--secret)");
      continue;
    }
    const lister = await loadLeaseLister(plugin.pluginDir, manifest?.id ?? path.basename(plugin.pluginDir), plugin.driverKey);
    if (!lister) continue;
    const configs = new Map<string, ProviderConfig>();
    const keep = (config: ProviderConfig) => configs.set(canonicalJson(config), config);
    if (lister.kind === "state-dir") {
      for (const row of plugin.rows) keep(typeof row.config.stateDir === "string" ? { stateDir: row.config.stateDir } : {});
      if (plugin.base) keep({});
    } else {
      for (const row of plugin.rows) {
        const config = usableConfig(row.config, inputs, `${plugin.driverKey} (lease ${row.id.slice(0, 8)})`);
        if (config) keep(config);
      }
      if (plugin.base) {
        const config = usableConfig(inputs.named?.pluginDir === plugin.pluginDir ? inputs.baseConfig : {}, inputs, plugin.driverKey);
        if (config) keep(config);
      }
    }
    sources.push({ pluginDir: plugin.pluginDir, driverKey: plugin.driverKey, lister, configs: [...configs.values()] });
  }
  return sources;
}

/** A stored config with its secrets read back and the `--secret` flags applied; undefined (with a warning) if it cannot be used. */
function usableConfig(stored: ProviderConfig, inputs: ListingInputs, what: string): ProviderConfig | undefined {
  let resolved: { config: ProviderConfig; secrets: string[] };
  try {
    resolved = resolveStoredSecretRefs(stored);
  } catch (error) {
    inputs.warn(`cannot list ${what} leases with a stored config: ${inputs.redactor.redact(describeError(error))}`);
    return undefined;
  }
  for (const secret of resolved.secrets) inputs.redactor.add(secret);
  const config = withSecrets(resolved.config, inputs.secretFlags);
  if (containsRedacted(config)) {
    inputs.warn(`cannot list ${what} leases with a stored config that has redacted fields: give them with --secret field=ENV_VAR or --secret-file field=PATH`);
    return undefined;
  }
  return config;
}

type PluginManifest = Awaited<ReturnType<typeof loadPluginPackage>>["manifest"];

async function manifestOf(pluginDir: string): Promise<PluginManifest | undefined> {
  try {
    return (await loadPluginPackage(pluginDir)).manifest;
  } catch {
    return undefined;
  }
}

/** The driver's config has secret fields (format secret-ref): a hosted provider's credentials. */
function needsCredentials(manifest: PluginManifest | undefined, driverKey: string): boolean {
  const driver = manifest?.environmentDrivers?.find((d) => d.driverKey === driverKey);
  const properties = (driver?.configSchema as { properties?: Record<string, { format?: unknown }> } | undefined)?.properties ?? {};
  return Object.values(properties).some((field) => field?.format === SECRET_REF_FORMAT);
}
