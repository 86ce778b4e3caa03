import { z } from "zod";
import { defineProviderConfig, fields, resolveSecretRef } from "@paperclip-sandbox/kit";

export const URL_ENV = "CODER_URL";
export const TOKEN_ENV = "CODER_SESSION_TOKEN";
export const WORKSPACE_HOME = "/home/coder";
const DEFAULT_REMOTE_CWD = `${WORKSPACE_HOME}/workspace`;
export const DEFAULT_RUNNER_SLUG = "paperclip-runner";
const DEFAULT_NAME_PREFIX = "paperclip";
/** Coder's workspace names are at most 32 characters; a name is the prefix, `-` and 16 characters of ours. */
const MAX_NAME_PREFIX = 15;
const TRANSPORTS = ["app-proxy", "rpty", "ssh"] as const;

export const DIRECT_RUNNER_REFUSED =
  "Direct runner URL is not supported: commands reach the runner app only through Coder's app proxy (the session token authenticates them there). Remove directRunnerUrl and set Runner app slug.";

const CONNECTION = "Connection";
const WORKSPACE = "Workspace";
const COMMANDS = "Commands";
const LIFECYCLE = "Lifecycle";

/** Coder's names (usernames, workspaces, templates): letters, digits and single hyphens. */
const CODER_NAME = /^[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*$/;
/** `coder_parameter` names: what Terraform accepts as an identifier. */
const PARAMETER_NAME = /^[a-zA-Z_][a-zA-Z0-9_-]*$/;
/** `coder_app` slugs. */
const APP_SLUG = /^[a-z0-9](-?[a-z0-9])*$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const coderName = (what: string) =>
  z
    .string()
    .max(32, { error: `must be a Coder ${what} name (at most 32 characters)` })
    .regex(CODER_NAME, { error: `must be a Coder ${what} name (letters, digits and single hyphens)` });

export const coderConfigSchema = z.object({
  coderUrl: fields
    .url({
      title: "Coder URL",
      description: `Your Coder deployment's access URL (https://coder.example.com). Empty: the worker's ${URL_ENV}.`,
      group: CONNECTION,
      examples: ["https://coder.example.com"],
    })
    .optional(),
  apiToken: fields.secretRef({
    envFallback: TOKEN_ENV,
    title: "Session token",
    description: "A Coder API token (coder tokens create) of the user whose workspaces Paperclip creates.",
    group: CONNECTION,
  }),
  template: fields.ui(coderName("template"), {
    title: "Template",
    description: "The Coder template every workspace is created from. It must declare the runner app (see the provider's README).",
    group: WORKSPACE,
    examples: ["paperclip"],
  }),
  workspaceParameters: fields
    .ui(
      z.record(z.string(), z.string()).superRefine((values, ctx) => {
        for (const name of Object.keys(values)) {
          if (!PARAMETER_NAME.test(name)) ctx.addIssue({ code: "custom", message: `${JSON.stringify(name.slice(0, 64))} is not a parameter name (a letter or _, then letters, digits, _ and -)` });
        }
      }),
      {
        title: "Workspace parameters",
        description: "Rich parameter values passed on every create and start build (name → value, values as strings).",
        group: WORKSPACE,
        advanced: true,
      },
    )
    .default({}),
  workspaceName: fields
    .ui(
      z
        .string()
        .regex(/^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/, { error: "must start with a letter; lowercase letters, digits and single hyphens" })
        .max(MAX_NAME_PREFIX, { error: `must be at most ${MAX_NAME_PREFIX} characters (Coder names are at most 32)` }),
      {
        title: "Workspace name prefix",
        description: `Every lease gets a workspace of its own named <prefix>-<16 characters>. Empty: ${DEFAULT_NAME_PREFIX}.`,
        group: WORKSPACE,
        advanced: true,
      },
    )
    .default(DEFAULT_NAME_PREFIX),
  workspaceDir: fields
    .absolutePosixPath({
      title: "Workspace directory",
      description: `Where Paperclip's commands run: a directory directly under ${WORKSPACE_HOME}. Empty: ${DEFAULT_REMOTE_CWD}.`,
      group: WORKSPACE,
      examples: [DEFAULT_REMOTE_CWD],
    })
    .optional(),
  // The seed's name for workspaceDir. Paperclip strips a config key named remoteCwd before it sends
  // a config to a plugin, so validation saves it as workspaceDir (see coderConfig below).
  remoteCwd: fields
    .absolutePosixPath({
      title: "Workspace directory (old name remoteCwd)",
      description: "The seed's name for Workspace directory: accepted and saved as Workspace directory (Paperclip does not pass a field named remoteCwd on to plugins).",
      group: WORKSPACE,
      advanced: true,
    })
    .optional(),
  commandTransport: fields
    .oneOf(TRANSPORTS, {
      title: "Command transport",
      description: "app-proxy: the runner app through Coder's app proxy (no local tools). rpty: the agent's terminal WebSocket (no runner app, output buffered). ssh: coder ssh through the Coder CLI.",
      group: COMMANDS,
    })
    .default("app-proxy"),
  runnerAppSlug: fields
    .ui(z.string().regex(APP_SLUG, { error: "must be a coder_app slug (lowercase letters, digits, single hyphens)" }), {
      title: "Runner app slug",
      description: `The coder_app of the runner. Empty: ${DEFAULT_RUNNER_SLUG}.`,
      group: COMMANDS,
      advanced: true,
    })
    .default(DEFAULT_RUNNER_SLUG),
  coderBin: fields
    .ui(
      z
        .string()
        .min(1)
        .regex(/^[^\0\n]+$/, { error: "must be a program name or path" }),
      { title: "Coder CLI", description: "The coder binary the ssh transport runs (name on PATH or absolute path). Empty: coder.", group: COMMANDS, advanced: true },
    )
    .default("coder"),
  stopAfterHours: fields.positiveInt({
    default: 8,
    max: 720,
    title: "Stop after",
    unit: "hours",
    description: "Coder stops a workspace this long after its start (its TTL), whatever Paperclip does. Empty: 8.",
    group: LIFECYCLE,
    advanced: true,
  }),
  // Parsed so an old config names its problem instead of failing as an unknown field; always refused.
  directRunnerUrl: fields.ui(z.string(), { title: "Direct runner URL (not supported)", description: DIRECT_RUNNER_REFUSED, group: COMMANDS, advanced: true }).optional(),
  // Images are the template's business in Coder: recorded in lease metadata, nothing more. At most
  // 200 characters: the host shows a longer field as a multi-line box.
  workerImage: fields
    .ui(z.string().max(200), {
      title: "Worker image (recorded only)",
      description: "Ignored by Coder (the template decides the image); kept in the lease metadata for reference.",
      group: WORKSPACE,
      advanced: true,
    })
    .optional(),
  reuseLease: fields.reuseLease(),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  timeoutMs: fields.timeoutMs({ default: 300_000, title: "Command timeout", description: "Time limit of one command when Paperclip sets none.", group: COMMANDS, advanced: true }),
});

export type CoderConfig = z.output<typeof coderConfigSchema>;

/** Rules across fields (and the platform), checked by validation and again before any use. */
export function configProblems(config: CoderConfig, platform: NodeJS.Platform = process.platform, env: NodeJS.ProcessEnv = process.env): string[] {
  const problems: string[] = [];
  if (config.directRunnerUrl !== undefined) problems.push(`Direct runner URL: ${DIRECT_RUNNER_REFUSED}`);
  if (config.workspaceDir !== undefined && config.remoteCwd !== undefined && config.workspaceDir !== config.remoteCwd) {
    problems.push(`Workspace directory and its old name remoteCwd name different directories (${config.workspaceDir}, ${config.remoteCwd}): set one`);
  }
  const dir = workspaceDirOf(config);
  const parent = dir.slice(0, dir.lastIndexOf("/"));
  const leaf = dir.slice(dir.lastIndexOf("/") + 1);
  if (parent !== WORKSPACE_HOME || leaf === "" || leaf === "." || leaf === "..") {
    problems.push(`Workspace directory: must be a directory directly under ${WORKSPACE_HOME} (like ${DEFAULT_REMOTE_CWD}), got ${dir}`);
  }
  if (platform === "win32" && env.CODER_HEADER_COMMAND) problems.push("CODER_HEADER_COMMAND is not supported on Windows (unset it, or use CODER_HEADER)");
  return problems;
}

export function coderUrlOf(config: Pick<CoderConfig, "coderUrl">, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = config.coderUrl ?? env[URL_ENV];
  return value && value.trim() !== "" ? value.replace(/\/+$/, "") : undefined;
}

export function tokenOf(config: Pick<CoderConfig, "apiToken">, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return resolveSecretRef(config.apiToken, TOKEN_ENV, env);
}

/** Non-fatal remarks: what may still come from the worker's environment at run time. */
export function configWarnings(config: CoderConfig, env: NodeJS.ProcessEnv = process.env): string[] {
  const warnings: string[] = [];
  if (!coderUrlOf(config, env)) warnings.push(`no Coder URL: set Coder URL, or ${URL_ENV} in the plugin worker's environment`);
  const token = tokenOf(config, env);
  if (!token) warnings.push(`no session token: set Session token, or ${TOKEN_ENV} in the plugin worker's environment`);
  else if (UUID.test(token.trim())) {
    warnings.push("Session token looks like an unresolved secret reference (a UUID), not a Coder token (<10 characters>-<22 characters>): check the secret it points to");
  }
  return warnings;
}

/** The workspace directory: Workspace directory, else its old name remoteCwd, else the default. */
export function workspaceDirOf(config: Pick<CoderConfig, "workspaceDir" | "remoteCwd">): string {
  return config.workspaceDir ?? config.remoteCwd ?? DEFAULT_REMOTE_CWD;
}

const baseConfig = defineProviderConfig(coderConfigSchema);

/**
 * The config, with one normalization: a directory given as remoteCwd (the seed's name) is saved as
 * workspaceDir, because the host strips a key named remoteCwd from every config it sends a plugin
 * (it is the host's own lease field) and the directory would silently fall back to the default.
 */
export const coderConfig: typeof baseConfig = {
  ...baseConfig,
  validate(raw) {
    const result = baseConfig.validate(raw);
    const normalized = result.normalizedConfig as Record<string, unknown> | undefined;
    if (!result.ok || !normalized || normalized.remoteCwd === undefined) return result;
    const { remoteCwd, ...rest } = normalized;
    return {
      ...result,
      normalizedConfig: { ...rest, workspaceDir: rest.workspaceDir ?? remoteCwd },
      warnings: [...(result.warnings ?? []), "remoteCwd is saved as Workspace directory (workspaceDir): Paperclip does not pass a field named remoteCwd on to plugins"],
    };
  },
};
