import { readFileSync } from "node:fs";
import { checkTimeScale, createVendorClock, type VendorClock } from "@paperclip-sandbox/emulator-kit";

/** A rich parameter of a template version (what `coder_parameter` declares). */
export interface ParameterSpec {
  name: string;
  displayName?: string;
  description?: string;
  /** `string` (default), `number`, `bool` or `list(string)`. */
  type?: "string" | "number" | "bool" | "list(string)";
  defaultValue?: string;
  /** Immutable parameters keep their first value (Coder refuses a change on a later build). */
  mutable?: boolean;
  /** An ephemeral value applies to one build only. */
  ephemeral?: boolean;
  required?: boolean;
  /** Allowed values (`option` blocks). */
  options?: Array<{ name: string; value: string; description?: string }>;
  validationRegex?: string;
  validationError?: string;
  validationMin?: number;
  validationMax?: number;
}

/** A `coder_app` of the agent. */
export interface AppSpec {
  slug: string;
  displayName?: string;
  /** The app inside the workspace, `http://localhost:<port>` (the path is prefixed to every request). */
  url: string;
  /** Subdomain apps are not served on the path-based proxy (Coder's rule). */
  subdomain?: boolean;
  share?: "owner" | "authenticated" | "organization" | "public";
  healthcheck?: { url: string; interval: number; threshold: number };
}

/** The template's one agent (`coder_agent` + its scripts and apps). */
export interface AgentSpec {
  name?: string;
  /** The agent's working directory (default the user's home). */
  directory?: string;
  /** Runs at every start build (`startup_script` / a `coder_script` with `run_on_start`). */
  startupScript?: string;
  /** `blocking` (default): the agent is `ready` only after the script exits 0. */
  startupScriptBehavior?: "blocking" | "non-blocking";
  /** Seconds before a still-running startup script makes the agent `start_timeout` (0: none). */
  startupScriptTimeoutSec?: number;
  /** Environment of the agent's processes (`coder_agent.env`). */
  env?: Record<string, string>;
  apps?: AppSpec[];
}

export interface TemplateSpec {
  name: string;
  displayName?: string;
  description?: string;
  parameters?: ParameterSpec[];
  agent?: AgentSpec;
}

/** What an emulator run can be told; every field has a default fit for tests. */
export interface CoderEmulatorOptions {
  /** Loopback port (default 0: any free port). */
  port?: number;
  /** The session token the emulator accepts (default a fresh `<10>-<22>` Coder token). */
  sessionToken?: string;
  /** The token's user (default `paperclip`). */
  username?: string;
  /** The user's one organization (default `coder`, Coder's default organization name). */
  organization?: string;
  /** Templates of that organization (default: `CODER_EMULATOR_TEMPLATES`, a JSON file of this list, else one bare `paperclip` template). */
  templates?: TemplateSpec[];
  /** Vendor milliseconds per real millisecond (default 1): build, agent and TTL durations run this much faster. */
  timeScale?: number;
  /** The vendor clock (a test's manual clock); default one of `timeScale`. */
  clock?: VendorClock;
  /** How long a provisioner job stays `pending` (default 0). */
  jobQueueMs?: number;
  /** How long a job runs beyond the real work of its transition (default 0). */
  jobRunMs?: number;
  /** How long a started agent is `connecting` before `connected` (default 0). */
  agentConnectMs?: number;
  /** How often app healthchecks run until healthy (default 100 ms; a template's interval once healthy). */
  healthPollMs?: number;
  /** A workspace (and its jail) never outlives this, whatever its TTL, so a crashed emulator leaks nothing for long (default 6 h). */
  maxLifetimeMs?: number;
  /** Parent directory of the jails' state directory (default the OS temp dir; keep it short: socket paths). */
  stateParentDir?: string;
  /** Test hook: the emulator's control surface (inject build failures, inspect workspaces). */
  expose?: (control: import("./deployment.js").DeploymentControl) => void;
}

export interface ResolvedOptions {
  port: number;
  clock: VendorClock;
  username: string;
  organization: string;
  templates: TemplateSpec[];
  jobQueueMs: number;
  jobRunMs: number;
  agentConnectMs: number;
  healthPollMs: number;
  maxLifetimeMs: number;
}

/** A template with nothing in it: its agent is ready at once and serves no app (enough for the PTY). */
export const BARE_TEMPLATE: TemplateSpec = { name: "paperclip", displayName: "Paperclip", agent: { name: "main" } };

const NAME = /^[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*$/;

export function resolveOptions(options: CoderEmulatorOptions, env: NodeJS.ProcessEnv = process.env): ResolvedOptions {
  const number = (name: string, value: number | undefined, fallback: number, min = 0): number => {
    const chosen = value ?? fallback;
    if (!Number.isFinite(chosen) || chosen < min) throw new TypeError(`coder emulator ${name}: must be a number >= ${min} (got ${String(value)})`);
    return chosen;
  };
  const name = (field: string, value: string) => {
    if (!NAME.test(value) || value.length > 32) throw new TypeError(`coder emulator ${field}: ${JSON.stringify(value)} is not a Coder name (letters, digits, single hyphens, at most 32)`);
    return value;
  };
  const templates = options.templates ?? templatesFromEnv(env) ?? [BARE_TEMPLATE];
  for (const template of templates) name("template name", template.name);
  return {
    port: number("port", options.port, 0),
    clock: options.clock ?? createVendorClock({ timeScale: checkTimeScale(options.timeScale, "coder emulator timeScale") }),
    username: name("username", options.username ?? "paperclip"),
    organization: name("organization", options.organization ?? "coder"),
    templates,
    jobQueueMs: number("jobQueueMs", options.jobQueueMs, 0),
    jobRunMs: number("jobRunMs", options.jobRunMs, 0),
    agentConnectMs: number("agentConnectMs", options.agentConnectMs, 0),
    healthPollMs: number("healthPollMs", options.healthPollMs, 100, 10),
    maxLifetimeMs: number("maxLifetimeMs", options.maxLifetimeMs, 6 * 60 * 60 * 1000, 1_000),
  };
}

function templatesFromEnv(env: NodeJS.ProcessEnv): TemplateSpec[] | undefined {
  const file = env.CODER_EMULATOR_TEMPLATES;
  if (!file) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new TypeError(`coder emulator CODER_EMULATOR_TEMPLATES: cannot read ${file} as JSON (${(error as Error).message})`);
  }
  if (!Array.isArray(parsed) || parsed.length === 0) throw new TypeError(`coder emulator CODER_EMULATOR_TEMPLATES: ${file} must hold a non-empty JSON array of templates`);
  return parsed as TemplateSpec[];
}
