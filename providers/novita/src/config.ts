import { z } from "zod";
import { defineProviderConfig, envdUrlFields, fields, missingApiKeyWarnings } from "@paperclip-sandbox/kit";

export const NOVITA_API_KEY_ENV = "NOVITA_API_KEY";
/** Domains on which the SDK switches to Novita's older API (other ids, request bodies and routes). */
const LEGACY_DOMAINS = new Set([
  "sandbox.novita.ai",
  "us-01.sandbox.novita.ai",
  "us-ga-01.sandbox.novita.ai",
  "us-ga-1.sandbox.novita.ai",
  "sandbox-dev.novita.ai",
  "us-01.sandbox-dev.novita.ai",
  "us-ga-01.sandbox-dev.novita.ai",
  "us-ca-1.sandbox-dev.novita.ai",
]);
const HOST_NAME = /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

export const novitaConfigSchema = z.object({
  apiKey: fields.secretRef({ envFallback: NOVITA_API_KEY_ENV, title: "API key", description: "Your Novita AI API key.", group: "Connection" }),
  domain: fields
    .ui(
      z
        .string()
        .trim()
        .superRefine((value, ctx) => {
          if (!HOST_NAME.test(value)) ctx.addIssue({ code: "custom", message: "must be a host name such as us-phx-1.sandbox.novita.ai" });
        }),
      {
        title: "Domain",
        description: "The Novita sandbox region's domain. Empty: the SDK's default (NOVITA_DOMAIN, else us-phx-1.sandbox.novita.ai).",
        group: "Connection",
      },
    )
    .optional(),
  template: fields
    .ui(z.string().trim().min(1, { error: "must not be empty" }), {
      title: "Template",
      description: "The Novita sandbox template (name or ID) every sandbox starts from. Empty: base.",
      group: "Sandbox",
    })
    .default("base"),
  requestedCwd: fields
    .absolutePosixPath({
      title: "Workspace directory",
      description: "The directory in the sandbox where Paperclip's workspace lives (created at acquire). Empty: /home/user/paperclip-workspace.",
      group: "Sandbox",
    })
    .default("/home/user/paperclip-workspace"),
  timeoutMs: fields.timeoutMs({
    default: 300_000,
    min: 10_000,
    max: 86_400_000,
    title: "Sandbox timeout",
    description:
      "How long Novita keeps a sandbox without being refreshed. While a lease is active the provider refreshes it, never past the lease's deadline. Also the time limit of a command when Paperclip sets none.",
    group: "Sandbox",
  }),
  requestTimeoutMs: fields.timeoutMs({
    default: 30_000,
    min: 1_000,
    max: 600_000,
    title: "Request timeout",
    description: "Time limit of one call to the Novita API (uploads and downloads get more in proportion to their size).",
    group: "Tuning",
    advanced: true,
  }),
  secure: fields.boolean({
    default: true,
    title: "Secure sandbox",
    description: "Ask for an access token that every call to the in-sandbox daemon must carry.",
    group: "Sandbox",
    advanced: true,
  }),
  autoPause: fields.boolean({
    default: false,
    title: "Pause on timeout",
    description: "When a sandbox's timeout runs out, pause it instead of killing it (a paused sandbox is resumed when its lease is used again).",
    group: "Sandbox",
    advanced: true,
  }),
  reuseLease: fields.reuseLease({
    description:
      'Pause a released sandbox (memory and running processes kept; killed if the pause fails) and resume it for the next run of the same issue. Paperclip reuses it only when Runner lifecycle (under Advanced options) is "warm" and the issue belongs to a project with a workspace; otherwise every run gets a fresh sandbox, killed at release.',
  }),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  ...envdUrlFields({
    apiUrl: "Override of the control-plane URL derived from the domain (https://api.<domain>), for a local emulator.",
    sandboxUrl: "One URL for the in-sandbox daemon of every sandbox instead of https://49983-<sandbox>.<domain>, for a local emulator.",
  }),
});

export type NovitaConfig = z.output<typeof novitaConfigSchema>;

export const novitaConfig = defineProviderConfig(novitaConfigSchema, {
  warnings: (config) => [
    ...missingApiKeyWarnings(config.apiKey, NOVITA_API_KEY_ENV),
    ...(config.domain && LEGACY_DOMAINS.has(config.domain.toLowerCase())
      ? [`Domain: ${config.domain} is one of Novita's legacy domains, where the SDK uses an older API this provider is not tested against`]
      : []),
  ],
});
