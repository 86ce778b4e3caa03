import { z } from "zod";
import { defineProviderConfig, envdUrlFields, fields, missingApiKeyWarnings } from "@paperclip-sandbox/kit";

export const E2B_API_KEY_ENV = "E2B_API_KEY";

export const e2bConfigSchema = z.object({
  template: fields
    .ui(z.string().trim().min(1, { error: "must not be empty" }), {
      title: "Template",
      description: "The E2B template (name or ID) every sandbox starts from. Empty: base.",
      group: "Sandbox",
    })
    .default("base"),
  apiKey: fields.secretRef({ envFallback: E2B_API_KEY_ENV, title: "API key", description: "Your E2B API key.", group: "Connection" }),
  timeoutMs: fields.timeoutMs({
    default: 300_000,
    min: 1_000,
    max: 86_400_000,
    title: "Sandbox timeout",
    description:
      "How long E2B keeps a sandbox without being refreshed. While a lease is active the provider refreshes it, never past the lease's deadline; a worker that stops refreshing lets the sandbox end this long after. Also the time limit of a command when Paperclip sets none.",
    group: "Sandbox",
  }),
  reuseLease: fields.reuseLease({
    description:
      'Pause a released sandbox (memory and running processes kept) and resume it for the next run of the same issue. Paperclip reuses it only when Runner lifecycle (under Advanced options) is "warm" and the issue belongs to a project with a workspace; otherwise every run gets a fresh sandbox, killed at release.',
  }),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  ...envdUrlFields({
    apiUrl: "The E2B control-plane URL, for a self-hosted E2B or a local emulator. Empty: https://api.e2b.app (or E2B_DOMAIN).",
    sandboxUrl: "One URL for the in-sandbox daemon (envd) of every sandbox, for a self-hosted E2B or a local emulator. Empty: each sandbox's own address.",
  }),
});

export type E2bConfig = z.output<typeof e2bConfigSchema>;

export const e2bConfig = defineProviderConfig(e2bConfigSchema, { warnings: (config) => missingApiKeyWarnings(config.apiKey, E2B_API_KEY_ENV) });
