import { loadPluginPackage, type PluginPackage } from "@paperclip-sandbox/worker-client";
import type { PluginEnvironmentDriverDeclaration } from "@paperclipai/plugin-sdk";
import type { JsonSchema } from "./config-loader.js";
import { UsageError, describeError } from "./errors.js";
import { resolveProvider, type ResolvedProvider } from "./provider-resolver.js";

/** A plugin package and the one environment driver of it the CLI talks to. */
export interface LoadedProvider {
  resolved: ResolvedProvider;
  pkg: PluginPackage;
  driver: PluginEnvironmentDriverDeclaration;
  driverKey: string;
  configSchema: JsonSchema;
  /** The manifest says leases can be kept and resumed (nested capability beats the legacy flag). */
  supportsReusableLeases: boolean;
}

function driverSupportsReusableLeases(driver: PluginEnvironmentDriverDeclaration): boolean {
  return driver.sandboxCapabilities?.reusableLeases ?? driver.supportsReusableLeases ?? false;
}

/** Resolves `--provider` / `--driver` and reads the plugin's manifest (no worker is started). */
export async function loadProvider(spec: string | undefined, driverFlag: string | undefined, cwd = process.cwd()): Promise<LoadedProvider> {
  const resolved = resolveProvider(spec, cwd);
  let pkg: PluginPackage;
  try {
    pkg = await loadPluginPackage(resolved.pluginDir);
  } catch (error) {
    throw new UsageError(`cannot load provider '${resolved.spec}': ${describeError(error)}`);
  }
  const drivers = pkg.manifest.environmentDrivers ?? [];
  if (drivers.length === 0) throw new UsageError(`provider '${resolved.spec}' declares no environment drivers in its manifest`);
  const wanted = driverFlag ?? resolved.requestedDriverKey;
  let driver: PluginEnvironmentDriverDeclaration | undefined;
  if (wanted !== undefined) {
    driver = drivers.find((d) => d.driverKey === wanted);
    if (!driver) {
      throw new UsageError(`provider '${resolved.spec}' has no driver '${wanted}' (drivers: ${drivers.map((d) => d.driverKey).join(", ")})`);
    }
  } else if (drivers.length === 1) {
    driver = drivers[0];
  } else {
    throw new UsageError(`provider '${resolved.spec}' has several drivers; choose one with --driver (${drivers.map((d) => d.driverKey).join(", ")})`);
  }
  return {
    resolved,
    pkg,
    driver: driver!,
    driverKey: driver!.driverKey,
    configSchema: (driver!.configSchema ?? {}) as JsonSchema,
    supportsReusableLeases: driverSupportsReusableLeases(driver!),
  };
}
