import { z } from "zod";
import { defineProviderConfig, FIELD_MAX_LENGTH, fields, formatCidr, parseCidr, resolveSecretRef } from "@paperclip-sandbox/kit";

const MODAL = "Modal";
const SANDBOX = "Sandbox";
const NETWORK = "Network";
const REUSE = "Lease reuse";
const TUNING = "Tuning";

/** Modal's longest sandbox lifetime (24 h). */
const MAX_SANDBOX_TIMEOUT_MS = 86_400_000;
const DEFAULT_SANDBOX_TIMEOUT_MS = 3_600_000;
const DEFAULT_EXEC_TIMEOUT_MS = 300_000;
const DEFAULT_WORKDIR = "/workspace/paperclip";
const DEFAULT_SERVER_URL = "https://api.modal.com:443";
const TOKEN_ID_ENV = "MODAL_TOKEN_ID";
const TOKEN_SECRET_ENV = "MODAL_TOKEN_SECRET";

/** Modal object names (apps, environments): letters, digits, dashes, dots and underscores, under 64. */
const MODAL_NAME = /^[A-Za-z0-9._-]{1,63}$/;
const NAME_RULE = "must be 1 to 63 letters, digits, dashes (-), dots (.) or underscores (_)";

/** Whole seconds: Modal takes sandbox lifetimes in seconds and the SDK refuses anything else. */
function wholeSeconds(ui: { title: string; description: string; group: string; advanced?: boolean; examples?: number[] }) {
  return fields.ui(
    z
      .number({ error: "must be a number" })
      .int({ error: "must be an integer" })
      .positive({ error: "must be greater than 0" })
      .multipleOf(1000, { error: "must be a whole number of seconds (a multiple of 1000)" })
      .max(MAX_SANDBOX_TIMEOUT_MS, { error: `must be at most ${MAX_SANDBOX_TIMEOUT_MS} (24 hours, Modal's limit)` }),
    { unit: "ms", ...ui },
  );
}

function cidrProblem(value: string): string | undefined {
  if (!value.includes("/") || parseCidr(value) === null) return "must be an IP range in CIDR form, e.g. 10.0.0.0/8 or 2001:db8::/32";
  return undefined;
}

export const modalConfigSchema = z
  .object({
    appName: fields
      .ui(z.string().regex(MODAL_NAME, { error: NAME_RULE }), {
        title: "App name",
        description: "The Modal app the sandboxes run under; created when missing. Empty: paperclip.",
        group: MODAL,
      })
      .default("paperclip"),
    image: fields
      .ui(z.string().min(1).max(FIELD_MAX_LENGTH.image), {
        title: "Image",
        description:
          "A container image from a public registry, e.g. node:22 or python:3.12-slim, or a custom image Paperclip captured (pc-, 16 hex digits, a dash and 8 more: written here by Environment → Custom image). It needs sh, tar and base64; Paperclip's bridge needs node. Empty: node:22.",
        group: SANDBOX,
      })
      .default("node:22"),
    tokenId: fields.secretRef({ envFallback: TOKEN_ID_ENV, title: "Token ID", description: "The ID half of a Modal token (ak-...), from modal token new or the Modal dashboard.", group: MODAL }),
    tokenSecret: fields.secretRef({ envFallback: TOKEN_SECRET_ENV, title: "Token secret", description: "The secret half of the same Modal token (as-...).", group: MODAL }),
    environment: fields
      .ui(z.string().regex(MODAL_NAME, { error: NAME_RULE }), {
        title: "Modal environment",
        description: "The Modal environment to use. Empty: the workspace's default environment.",
        group: MODAL,
        advanced: true,
      })
      .optional(),
    workdir: fields
      .absolutePosixPath({
        title: "Working directory",
        description: "The workspace inside the sandbox (an absolute path); Paperclip's files and commands go there. Empty: /workspace/paperclip.",
        group: SANDBOX,
        advanced: true,
      })
      .default(DEFAULT_WORKDIR),
    sandboxTimeoutMs: wholeSeconds({
      title: "Sandbox timeout",
      description: "Modal ends a sandbox this long after it starts, whatever it is doing (at most 24 hours). A lease's expiry is this or the run's deadline, whichever is sooner. Empty: 1 hour.",
      group: SANDBOX,
      examples: [600_000, 3_600_000, 86_400_000],
    }).default(DEFAULT_SANDBOX_TIMEOUT_MS),
    idleTimeoutMs: wholeSeconds({
      title: "Idle timeout",
      description: "Modal ends a sandbox that ran no command for this long. Empty: no idle timeout.",
      group: SANDBOX,
      advanced: true,
      examples: [300_000, 900_000],
    }).optional(),
    execTimeoutMs: fields.timeoutMs({
      default: DEFAULT_EXEC_TIMEOUT_MS,
      max: MAX_SANDBOX_TIMEOUT_MS,
      title: "Command timeout",
      description: "Time limit of one command when Paperclip sets none; Modal enforces it in whole seconds (rounded up).",
      group: TUNING,
      advanced: true,
      examples: [60_000, 300_000, 1_800_000],
    }),
    blockNetwork: fields.boolean({
      default: false,
      title: "Block network",
      description: "No outbound network at all from the sandbox. Cannot be combined with Allowed IP ranges.",
      group: NETWORK,
    }),
    cidrAllowlist: fields.stringList({
      item: cidrProblem,
      itemExamples: ["10.0.0.0/8", "203.0.113.0/24"],
      title: "Allowed IP ranges",
      description: "When set, the sandbox may reach only these IP ranges (CIDR form, e.g. 10.0.0.0/8), one per item. Empty: no restriction. Cannot be combined with Block network.",
      group: NETWORK,
    }),
    reuseLease: fields.reuseLease({
      description:
        'Keep a released sandbox for the next run of the same issue. Modal has no pause: with Reuse via "running" the kept sandbox keeps running and is billed until its Sandbox timeout or Idle timeout; with "snapshot" its files are saved and the sandbox ends. Paperclip reuses a lease only when Runner lifecycle (under Advanced options) is "warm" and the issue belongs to a project with a workspace.',
    }),
    reuseVia: fields
      .oneOf(["running", "snapshot"], {
        title: "Reuse via",
        description:
          'How a reused lease is kept between runs. "running": the sandbox keeps running (billed while idle; processes and files survive). "snapshot": at release the filesystem is snapshotted and the sandbox ends (no billing while idle); the next run starts a new sandbox from the snapshot, so files and installed tools survive but processes do not. Empty: running.',
        group: REUSE,
        advanced: true,
      })
      .default("running"),
    runnerLifecycleMode: fields.runnerLifecycleMode(),
    serverUrl: fields
      .url({
        title: "API server URL",
        description: "Modal's API endpoint. Change it only to point at a test server (plain http is accepted for localhost). Empty: https://api.modal.com:443.",
        group: TUNING,
        advanced: true,
      })
      .default(DEFAULT_SERVER_URL),
  })
  .superRefine((config, ctx) => {
    if (config.blockNetwork === true && (config.cidrAllowlist?.length ?? 0) > 0) {
      ctx.addIssue({ code: "custom", path: ["cidrAllowlist"], message: "cannot be combined with Block network (choose one)" });
    }
  });

export type ModalConfig = z.output<typeof modalConfigSchema>;

/** True when a reused lease keeps its sandbox running (and billed) between runs. */
export function billsWhileReused(config: ModalConfig): boolean {
  return config.reuseLease === true && config.reuseVia === "running";
}

export function billingWarning(config: ModalConfig): string {
  const idle = config.idleTimeoutMs ? ` or its idle timeout (${config.idleTimeoutMs / 1000} s)` : "";
  return `reused leases keep their Modal sandbox running between runs (Modal has no pause): it is billed until its sandbox timeout (${config.sandboxTimeoutMs / 1000} s)${idle} ends it; set Reuse via to "snapshot" to stop billing while idle`;
}

export const modalConfig = defineProviderConfig(modalConfigSchema, {
  warnings: (config) => {
    const warnings: string[] = [];
    if (billsWhileReused(config)) warnings.push(billingWarning(config));
    if (config.reuseVia === "snapshot" && !config.reuseLease) warnings.push('Reuse via "snapshot" has no effect without Reuse lease');
    if (config.idleTimeoutMs !== undefined && config.idleTimeoutMs >= config.sandboxTimeoutMs) warnings.push("Idle timeout is not shorter than Sandbox timeout, so it never ends a sandbox");
    return warnings;
  },
});

export interface ModalCredentials {
  tokenId: string;
  tokenSecret: string;
}

/** The token pair from the config, else from the worker's environment; each missing half is named. */
export function credentialsOf(config: Pick<ModalConfig, "tokenId" | "tokenSecret">, env: NodeJS.ProcessEnv = process.env): { credentials?: ModalCredentials; missing: string[] } {
  const tokenId = resolveSecretRef(config.tokenId, TOKEN_ID_ENV, env);
  const tokenSecret = resolveSecretRef(config.tokenSecret, TOKEN_SECRET_ENV, env);
  const missing = [
    ...(tokenId ? [] : [`Token ID: required (or set ${TOKEN_ID_ENV} in the plugin worker's environment)`]),
    ...(tokenSecret ? [] : [`Token secret: required (or set ${TOKEN_SECRET_ENV} in the plugin worker's environment)`]),
  ];
  return tokenId && tokenSecret ? { credentials: { tokenId, tokenSecret }, missing } : { missing };
}

/** Normalized CIDR ranges for Modal's outbound allowlist. */
export function allowlistOf(config: ModalConfig): string[] {
  return config.cidrAllowlist.map((item) => formatCidr(parseCidr(item)!));
}
