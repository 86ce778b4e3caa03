import { z } from "zod";
import { defineProviderConfig, FIELD_MAX_LENGTH, fields, resolveSecretRef } from "@paperclip-sandbox/kit";

export const API_KEY_ENV = "DAYTONA_API_KEY";
const DEFAULT_API_URL = "https://app.daytona.io/api";
export const RESOURCES_NEED_IMAGE = "Daytona resource settings require image-backed sandbox creation; snapshot/default sandbox creation cannot override CPU, memory, disk, or GPU";
export const SNAPSHOT_AND_IMAGE = "Snapshot and Image are both set, which is ambiguous: set one (snapshot-based or image-based creation), or neither for Daytona's default snapshot";

const CONNECTION = "Connection";
const SANDBOX = "Sandbox";
const RESOURCES = "Resources";
const LIFECYCLE = "Quota-safe lifecycle";
const TUNING = "Tuning";

/** A snapshot name or an image reference (the longer of the two). */
const name = (ui: { title: string; description: string }) =>
  fields.ui(z.string().max(FIELD_MAX_LENGTH.image).regex(/^\S+$/, { error: "must not contain spaces" }), { ...ui, group: SANDBOX }).optional();
const resource = (ui: { title: string; unit: string; description: string; examples: number[] }) => fields.positiveInt({ ...ui, max: 1024, group: RESOURCES, advanced: true }).optional();
const interval = (ui: { title: string; description: string; min: number; default: number }) => fields.positiveInt({ ...ui, unit: "min", max: 525_600, group: LIFECYCLE, advanced: true });

export const daytonaConfigSchema = z.object({
  apiKey: fields.secretRef({ envFallback: API_KEY_ENV, title: "API key", description: "A Daytona API key (dtn_...).", group: CONNECTION }),
  apiUrl: fields.url({ title: "API URL", description: `Daytona's API endpoint. Empty: ${DEFAULT_API_URL}.`, group: CONNECTION }).default(DEFAULT_API_URL),
  target: fields
    .ui(z.string().regex(/^[a-z0-9-]+$/, { error: "must be a Daytona target such as us or eu" }), {
      title: "Target",
      description: "The region sandboxes are created in (us, eu, ...). Empty: the organization's default.",
      group: CONNECTION,
    })
    .optional(),
  snapshot: name({ title: "Snapshot", description: "Create sandboxes from this snapshot. Leave Snapshot and Image empty for Daytona's default snapshot." }),
  image: name({ title: "Image", description: "Create sandboxes from this container image (e.g. python:3.12-slim) instead of a snapshot; needed for the resource settings." }),
  cpu: resource({ title: "CPU", unit: "cores", description: "Cores per sandbox. Image-based sandboxes only.", examples: [1, 2, 4] }),
  memory: fields
    .ui(z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8)], { error: "must be one of 1, 2, 4, 8" }), {
      title: "Memory",
      unit: "GiB",
      description: "Memory per sandbox: 1, 2, 4 or 8 GiB. Image-based sandboxes only.",
      group: RESOURCES,
      advanced: true,
    })
    .optional(),
  disk: resource({ title: "Disk", unit: "GiB", description: "Disk per sandbox. Image-based sandboxes only.", examples: [3, 10] }),
  gpu: resource({ title: "GPU", unit: "units", description: "GPUs per sandbox. Image-based sandboxes only.", examples: [1] }),
  autoStopInterval: interval({ title: "Auto-stop after idle", min: 0, default: 15, description: "Daytona stops a sandbox idle this long; 0 disables auto-stop. Empty: 15." }),
  autoArchiveInterval: interval({
    title: "Auto-archive after stop",
    min: 0,
    default: 60,
    description: "Daytona archives a sandbox stopped this long, which frees its disk quota; 0 means Daytona's maximum. Empty: 60.",
  }),
  autoDeleteInterval: interval({
    title: "Auto-delete after stop",
    min: -1,
    default: 10_080,
    description: "Daytona deletes a sandbox stopped this long; 0 deletes it when it stops, -1 never. Empty: 10080 (7 days).",
  }),
  reuseLease: fields.reuseLease(),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  liveOutput: fields.boolean({
    default: false,
    title: "Live command output",
    description:
      "Stream each command's stdout and stderr while it runs, through Daytona's session API and its log stream: 2 Daytona calls per command instead of 1, and output travels as text. Off: output arrives when the command ends.",
    group: TUNING,
    advanced: true,
  }),
  timeoutMs: fields.timeoutMs({ default: 300_000, title: "Command timeout", description: "Time limit of one command when Paperclip sets none.", group: TUNING, advanced: true }),
});

export type DaytonaConfig = z.output<typeof daytonaConfigSchema>;

/** Rules across fields, checked by validation and again by acquire (whose config is parsed leniently). */
export function creationProblems(config: DaytonaConfig): string[] {
  const problems: string[] = [];
  if (config.snapshot !== undefined && config.image !== undefined) problems.push(SNAPSHOT_AND_IMAGE);
  const resources = [config.cpu, config.memory, config.disk, config.gpu].some((value) => value !== undefined);
  if (resources && config.image === undefined) problems.push(RESOURCES_NEED_IMAGE);
  return problems;
}

/** The API key: the config's, else the worker's DAYTONA_API_KEY. */
export function apiKeyOf(config: DaytonaConfig, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return resolveSecretRef(config.apiKey, API_KEY_ENV, env);
}

export const daytonaConfig = defineProviderConfig(daytonaConfigSchema);

/** Non-fatal remarks: the key may still come from the worker's environment at run time. */
export function configWarnings(config: DaytonaConfig, env: NodeJS.ProcessEnv = process.env): string[] {
  return apiKeyOf(config, env) ? [] : [`no API key: set API key, or ${API_KEY_ENV} in the plugin worker's environment`];
}
