import { z } from "zod";
import { defineProviderConfig, fields } from "@paperclip-sandbox/kit";

const DEFAULT_CWD = "/workspace/paperclip";
const DEFAULT_SESSION_ID = "paperclip";
export const REUSE_NEEDS_KEEP_ALIVE = "Reuse lease: needs Keep alive on (a Cloudflare sandbox's files live only while its container runs; without keep-alive it sleeps and loses them)";
export const NAMED_NEEDS_SESSION_ID = `Session ID: required when Session strategy is named (leave the field out for the default, ${DEFAULT_SESSION_ID})`;

const CONNECTION = "Bridge";
const SANDBOX = "Sandbox";
const SESSIONS = "Sessions";

export const cloudflareConfigSchema = z.object({
  bridgeBaseUrl: fields.url({
    title: "Bridge URL",
    description:
      "The URL of the bridge Worker you deployed (providers/cloudflare/bridge), e.g. https://paperclip-cloudflare-sandbox-bridge.<account>.workers.dev. https unless it is on this machine (localhost).",
    group: CONNECTION,
  }),
  bridgeAuthToken: fields.secretRef({
    title: "Bridge token",
    description: "The bridge's BRIDGE_AUTH_TOKEN secret (wrangler secret put BRIDGE_AUTH_TOKEN); sent as a bearer token.",
    group: CONNECTION,
  }),
  bridgeRequestTimeoutMs: fields.timeoutMs({
    default: 300_000,
    title: "Bridge request timeout",
    description: "How long one request to the bridge may take (a command's request gets its own timeout plus 30 s when that is longer).",
    group: CONNECTION,
    advanced: true,
  }),
  requestedCwd: fields
    .absolutePosixPath({ title: "Workspace directory", description: `The lease's working directory inside the sandbox. Empty: ${DEFAULT_CWD}.`, group: SANDBOX })
    .default(DEFAULT_CWD),
  keepAlive: fields.boolean({
    default: false,
    title: "Keep alive",
    description: "Keep the sandbox's container running while it is idle (it must then be destroyed explicitly, which release does). Needed for lease reuse.",
    group: SANDBOX,
  }),
  sleepAfter: fields
    .ui(z.string().regex(/^\d+(ms|s|m|h)?$/, { error: "must be a duration such as 30s, 10m or 1h" }), {
      title: "Sleep after",
      description: "Idle time after which a sandbox without keep-alive sleeps (and loses its files). Empty: 1h.",
      group: SANDBOX,
      advanced: true,
    })
    .default("1h"),
  normalizeId: fields.boolean({
    default: true,
    title: "Normalize sandbox IDs",
    description: "Lower-case sandbox ids and replace characters other than a-z, 0-9 and -.",
    group: SANDBOX,
    advanced: true,
  }),
  sessionStrategy: fields
    .oneOf(["named", "default"] as const, {
      title: "Session strategy",
      description: "named: commands run in named sessions (a timeout ends only that command and its session). default: the sandbox's default session (a timeout destroys the sandbox).",
      group: SESSIONS,
      advanced: true,
    })
    .default("named"),
  sessionId: fields
    .ui(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, { error: "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit" }), {
      title: "Session ID",
      description: `Name of the named session (more sessions for concurrent commands get -2, -3, ... appended). Required when Session strategy is named; when left out: ${DEFAULT_SESSION_ID}.`,
      group: SESSIONS,
      advanced: true,
    })
    .optional(),
  reuseLease: fields.reuseLease({
    description:
      'Keep a released sandbox running and give it to the next run of the same issue. Needs Keep alive. Paperclip reuses it only when Runner lifecycle (under Advanced options) is "warm" and the issue belongs to a project with a workspace.',
  }),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  liveOutput: fields.boolean({
    default: true,
    title: "Live command output",
    description:
      "With the bridge from providers/cloudflare/bridge: run each command as a streamed process (output while it runs, streamed stdin, duplex channels). The container then sees a command end at its next 100 ms log poll. Off: one JSON exec per command, output when it ends (about 80 ms faster for a short command), no duplex channels. A bridge from upstream's template always works as off.",
    group: SESSIONS,
    advanced: true,
  }),
  timeoutMs: fields.timeoutMs({ default: 300_000, title: "Command timeout", description: "Time limit of one command when Paperclip sets none.", group: SESSIONS, advanced: true }),
});

export type CloudflareConfig = z.output<typeof cloudflareConfigSchema>;

const isBlank = (value: unknown) => typeof value === "string" && value.trim() === "";

/**
 * Rules across fields, checked by validation and again by acquire. `raw` (validation only) is the
 * config as sent: a Session ID given blank under the named strategy is refused (the schema would
 * otherwise treat it as left out and use the default).
 */
export function configProblems(config: CloudflareConfig, raw?: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (config.reuseLease && !config.keepAlive) problems.push(REUSE_NEEDS_KEEP_ALIVE);
  if (config.sessionStrategy === "named" && raw && "sessionId" in raw && isBlank(raw.sessionId)) problems.push(NAMED_NEEDS_SESSION_ID);
  return problems;
}

export const sessionIdOf = (config: CloudflareConfig): string => config.sessionId ?? DEFAULT_SESSION_ID;

export const cloudflareConfig = defineProviderConfig(cloudflareConfigSchema);
