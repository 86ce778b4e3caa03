import { fields, resolveSecretRef } from "../../config/fields.js";

/**
 * The two URL overrides every E2B-family config has (a self-hosted control plane, or a local
 * emulator): the control-plane URL and one URL for every sandbox's envd. Each vendor words the
 * default its own way.
 */
export function envdUrlFields(describe: { apiUrl: string; sandboxUrl: string }) {
  const url = (title: string, description: string) => fields.url({ title, description, group: "Connection", advanced: true }).optional();
  return { apiUrl: url("API URL", describe.apiUrl), sandboxUrl: url("Sandbox URL", describe.sandboxUrl) };
}

/** The warning for an API key that is neither in the config nor in the worker's environment. */
export function missingApiKeyWarnings(apiKey: string | undefined, envName: string, env: NodeJS.ProcessEnv = process.env): string[] {
  return resolveSecretRef(apiKey, envName, env) === undefined ? [`API key: not set, and the worker has no ${envName}: every call will be refused`] : [];
}
