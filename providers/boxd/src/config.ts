import { z } from "zod";
import { defineProviderConfig, fields, resolveSecretRef } from "@paperclip-sandbox/kit";
import { checkExchangeUrl, DEFAULT_API_URL, DEFAULT_EXCHANGE_URL, parseApiUrl } from "./endpoint.js";

const BOXD = "boxd";
const MACHINE = "Machine";
const TUNING = "Tuning";

export const API_KEY_ENV = "BOXD_API_KEY";
const DEFAULT_TIMEOUT_MS = 3_600_000;
const DEFAULT_NAME_PREFIX = "paperclip";
/** boxd's size classes: vcpu → memory (GiB). */
export const VCPU_SIZES = [1, 2, 4, 8] as const;
export const MEMORY_GIB: Readonly<Record<number, number>> = { 1: 4, 2: 8, 4: 16, 8: 32 };
/** A machine name is `<prefix>-<8 of the run>-<6 random>` and at most 55 characters (it is a host name). */
const PREFIX_MAX = 38;
const DNS = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** A field whose value must pass a parser (the parser's message is the rule). */
function parsed(check: (value: string) => unknown, ui: Parameters<typeof fields.ui>[1]) {
  return fields.ui(
    z.string().superRefine((value, ctx) => {
      try {
        check(value);
      } catch (error) {
        ctx.addIssue({ code: "custom", message: (error as Error).message });
      }
    }),
    ui,
  );
}

export const boxdConfigSchema = z
  .object({
    apiKey: fields.secretRef({
      envFallback: API_KEY_ENV,
      title: "API key",
      description: "A boxd API key (bxd_...), from the boxd console or the boxd CLI (boxd api-key create). It is exchanged for short-lived tokens and never enters a machine.",
      group: BOXD,
    }),
    org: fields
      .ui(z.string().regex(DNS, { error: "must be an org slug (lowercase letters, digits and dashes)" }), {
        title: "Org",
        description: "The boxd org the machines belong to (the key must be a member). Empty: the key's own org.",
        group: BOXD,
      })
      .optional(),
    snapshot: fields
      .ui(z.string().regex(DNS, { error: "must be a snapshot name (lowercase letters, digits and dashes)" }), {
        title: "Snapshot",
        description: "Start every machine from this boxd snapshot (its disk and size). Empty: boxd's default image (Ubuntu 24.04 with Node, git, Docker and the agent CLIs).",
        group: MACHINE,
      })
      .optional(),
    // boxd templates came after the previous release's name form: only the digest form names one.
    templateRef: fields
      .templateRef({
        title: "Custom image template",
        description:
          "The boxd snapshot Paperclip captured as this environment's custom image; machines start from it (its disk and size). Paperclip sets it when you capture a custom image; empty: Snapshot, else boxd's default image.",
        group: MACHINE,
        advanced: true,
      })
      .optional(),
    vcpu: fields
      .ui(z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8)], { error: "must be one of 1, 2, 4, 8 (boxd's sizes)" }), {
        title: "vCPUs",
        description: "Machine size: 1 (4 GiB), 2 (8 GiB), 4 (16 GiB) or 8 (32 GiB). Empty: the org's default (2). Not with Snapshot: a restored machine keeps the snapshot's size.",
        group: MACHINE,
      })
      .optional(),
    namePrefix: fields
      .ui(
        z
          .string()
          .max(PREFIX_MAX, { error: `must be at most ${PREFIX_MAX} characters (machine names are host names)` })
          .regex(DNS, { error: "must be lowercase letters, digits and dashes, starting and ending with a letter or digit" }),
        {
          title: "Name prefix",
          description: "Machine names start with this, then part of the run id and a random suffix. Empty: paperclip.",
          group: MACHINE,
          advanced: true,
        },
      )
      .default(DEFAULT_NAME_PREFIX),
    timeoutMs: fields.timeoutMs({
      default: DEFAULT_TIMEOUT_MS,
      title: "Command timeout",
      description: "Time limit of one command when Paperclip sets none; at the limit the command's whole process group is ended. Empty: 1 hour.",
      group: TUNING,
      examples: [300_000, 3_600_000],
    }),
    reuseLease: fields.reuseLease({
      description:
        'Suspend a released machine (memory, processes and disk kept; boxd resumes it in about 0.1 s) and resume it for the next run of the same issue. Paperclip reuses it only when Runner lifecycle (under Advanced options) is "warm" and the issue belongs to a project with a workspace; otherwise every run gets a fresh machine, deleted at release.',
    }),
    runnerLifecycleMode: fields.runnerLifecycleMode(),
    apiUrl: parsed(parseApiUrl, {
      title: "API URL",
      description: `boxd's gRPC endpoint: https://host:port, or host:port (TLS unless loopback); plain http only for a local test server. Empty: ${DEFAULT_API_URL}.`,
      group: TUNING,
      advanced: true,
    }).default(DEFAULT_API_URL),
    exchangeUrl: parsed(checkExchangeUrl, {
      title: "Token exchange URL",
      description: `Where the API key is exchanged for a token (https; http only for loopback). Empty: ${DEFAULT_EXCHANGE_URL}.`,
      group: TUNING,
      advanced: true,
    }).default(DEFAULT_EXCHANGE_URL),
  })
  .superRefine((config, ctx) => {
    if (config.vcpu !== undefined && config.snapshot !== undefined) {
      ctx.addIssue({ code: "custom", path: ["vcpu"], message: "cannot be combined with Snapshot (a machine restored from a snapshot keeps the snapshot's size)" });
    }
  });

export type BoxdConfig = z.output<typeof boxdConfigSchema>;

export const boxdConfig = defineProviderConfig(boxdConfigSchema);

/** The API key from the config, else the worker's BOXD_API_KEY. */
export function apiKeyOf(config: Pick<BoxdConfig, "apiKey">, env: NodeJS.ProcessEnv): string | undefined {
  return resolveSecretRef(config.apiKey, API_KEY_ENV, env);
}

export const MISSING_KEY = `API key: required (or set ${API_KEY_ENV} in the plugin worker's environment)`;
