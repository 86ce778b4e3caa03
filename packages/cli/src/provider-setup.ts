import { createHash } from "node:crypto";
import { canonicalJson, createSecretRedactor, secretFieldPaths, type SecretRedactor } from "@paperclip-sandbox/kit";
import { applySetFlags, getPath, readConfigFile, resolveSecretFlags, withSecretRefs, withSecrets, type ProviderConfig, type ResolvedSecrets } from "./config-loader.js";
import { stringList } from "./cli-args.js";
import { CliFailure, UsageError, describeError } from "./errors.js";
import { hostId } from "./host-identity.js";
import { loadProvider, type LoadedProvider } from "./provider-loader.js";
import { ProviderSession } from "./provider-session.js";

/** Everything a provider-facing command needs before it starts a worker. */
export interface PreparedProvider {
  provider: LoadedProvider;
  /** Config with secrets, for the provider only. */
  config: ProviderConfig;
  secrets: ResolvedSecrets;
  redactor: SecretRedactor;
  environmentId: string;
  verbose: boolean;
  /** Variables the provider's worker gets on top of the host's scrubbed environment (a vendor emulator's URL and credential). */
  workerEnv?: Record<string, string>;
}

function defaultEnvironmentId(): string {
  return `cli-${hostId()}`;
}

/** Provider, config file, `--set` flags and secrets, in that order; nothing is started. */
export async function prepareProvider(values: Record<string, unknown>, extraConfig: ProviderConfig = {}): Promise<PreparedProvider> {
  const provider = await loadProvider(values.provider as string | undefined, values.driver as string | undefined);
  const redactor = createSecretRedactor();
  const fromFile = typeof values.config === "string" ? readConfigFile(values.config) : {};
  const schema = provider.configSchema;
  const secrets = resolveSecretFlags(stringList(values.secret), stringList(values["secret-file"]), schema);
  for (const value of secrets.values.values()) redactor.add(value);
  let config = applySetFlags({ ...fromFile, ...extraConfig }, stringList(values.set), schema);
  // Secret fields given in plaintext (config file or --set) are still secrets: never print them.
  for (const field of secretFieldPaths(schema)) {
    const value = getPath(config, field);
    if (typeof value === "string") redactor.add(value);
  }
  config = withSecrets(config, secrets);
  const environmentId = typeof values.environment === "string" && values.environment ? values.environment : defaultEnvironmentId();
  return { provider, config, secrets, redactor, environmentId, verbose: values.verbose === true };
}

/** The config as it may be stored: secret references instead of values, anything secret-looking redacted. */
export function storableConfig(prepared: PreparedProvider, config: ProviderConfig = prepared.config): ProviderConfig {
  return prepared.redactor.redactDeep(withSecretRefs(config, prepared.secrets));
}

export function configFingerprint(driverKey: string, storedConfig: ProviderConfig): string {
  return createHash("sha256")
    .update(canonicalJson([driverKey, storedConfig]))
    .digest("hex")
    .slice(0, 32);
}

/** Starts a worker for the prepared provider (no validation), with `config` (default: the prepared one). */
export function startSession(prepared: PreparedProvider, config: ProviderConfig = prepared.config): Promise<ProviderSession> {
  return ProviderSession.start(prepared.provider, {
    config,
    environmentId: prepared.environmentId,
    redactor: prepared.redactor,
    verbose: prepared.verbose,
    workerEnv: prepared.workerEnv,
  });
}

/**
 * Starts the worker and validates the config with the provider; an invalid config is bad input.
 * The provider's `normalizedConfig` (when it returns one) is used from then on, as the host does.
 */
export async function startValidatedSession(prepared: PreparedProvider): Promise<ProviderSession> {
  const session = await startSession(prepared);
  try {
    const result = await session.validateConfig();
    if (!result.ok) {
      const first = result.errors?.[0] ?? "the provider rejected the config";
      throw new UsageError(`invalid config for ${prepared.provider.driverKey}: ${prepared.redactor.redact(first)}`);
    }
    if (result.normalizedConfig) {
      session.config = result.normalizedConfig;
      prepared.config = result.normalizedConfig;
    }
    return session;
  } catch (error) {
    await session.close();
    if (error instanceof UsageError) throw error;
    throw new CliFailure(`cannot validate config with ${prepared.provider.driverKey}: ${prepared.redactor.redact(describeError(error))}`);
  }
}
