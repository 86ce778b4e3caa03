/**
 * One Coder deployment as a config names it: the control-plane client (token, extra headers), the
 * token's user, and templates resolved by name (with their rich parameters), cached per worker.
 */
import { createCoderApi, type CoderApi, type RichParameter, type Template, type User } from "./coder-api.js";
import { coderUrlOf, tokenOf, URL_ENV, TOKEN_ENV, type CoderConfig } from "./config.js";
import { controlPlaneHeaders } from "./extra-headers.js";

export interface ResolvedTemplate {
  template: Template;
  parameters: RichParameter[];
}

export interface CoderSession {
  readonly url: string;
  readonly token: string;
  readonly api: CoderApi;
  me(signal?: AbortSignal): Promise<User>;
  template(name: string, signal?: AbortSignal): Promise<ResolvedTemplate>;
}

export interface SessionDeps {
  env: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  fetch?: typeof globalThis.fetch;
  log?: (message: string) => void;
}

/** Missing URL or token: named by field and variable, before any call. */
class CoderConfigError extends Error {
  override name = "CoderConfigError";
}

const TEMPLATE_TTL_MS = 60_000;

function createSession(url: string, token: string, api: CoderApi): CoderSession {
  let me: Promise<User> | undefined;
  const templates = new Map<string, { at: number; value: Promise<ResolvedTemplate> }>();
  const resolveTemplate = async (name: string, signal?: AbortSignal): Promise<ResolvedTemplate> => {
    const organizations = await api.organizations(signal);
    const found: Template[] = [];
    for (const organization of organizations) {
      const template = await api.template(organization.id, name, signal);
      if (template) found.push(template);
    }
    if (found.length === 0) throw new Error(`Coder template "${name}" not found in the token user's organizations (${organizations.map((o) => o.name).join(", ") || "none"})`);
    if (found.length > 1) throw new Error(`Coder template "${name}" exists in several organizations (${found.map((t) => t.organization_id).join(", ")}); use a name only one of them has`);
    const template = found[0]!;
    return { template, parameters: await api.richParameters(template.active_version_id, signal) };
  };
  return {
    url,
    token,
    api,
    me(signal) {
      me ??= api.me(signal).catch((error: unknown) => {
        me = undefined;
        throw error;
      });
      return me;
    },
    template(name, signal) {
      const cached = templates.get(name);
      if (cached && Date.now() - cached.at < TEMPLATE_TTL_MS) return cached.value;
      const value = resolveTemplate(name, signal);
      templates.set(name, { at: Date.now(), value });
      value.catch(() => templates.delete(name));
      return value;
    },
  };
}

/** A session per deployment, token and header set (a worker serves many configs). */
export function createSessionCache(deps: SessionDeps): (config: CoderConfig) => Promise<CoderSession> {
  const sessions = new Map<string, Promise<CoderSession>>();
  return (config) => {
    const url = coderUrlOf(config, deps.env);
    const token = tokenOf(config, deps.env);
    if (!url) return Promise.reject(new CoderConfigError(`no Coder URL: set Coder URL, or ${URL_ENV} in the plugin worker's environment`));
    if (!token) return Promise.reject(new CoderConfigError(`no session token: set Session token, or ${TOKEN_ENV} in the plugin worker's environment`));
    const key = JSON.stringify([url, token]);
    let session = sessions.get(key);
    if (!session) {
      session = controlPlaneHeaders(deps.env, deps.platform).then((extraHeaders) =>
        createSession(url, token, createCoderApi({ baseUrl: url, token, extraHeaders, fetch: deps.fetch, onRetry: deps.log })),
      );
      session.catch(() => sessions.delete(key));
      sessions.set(key, session);
    }
    return session;
  };
}

/** The config's parameters against the template's: unknown names and required ones left out are refused. */
export function parameterProblems(given: Readonly<Record<string, string>>, resolved: ResolvedTemplate, templateName: string): string[] {
  const problems: string[] = [];
  const known = new Map(resolved.parameters.map((parameter) => [parameter.name, parameter]));
  for (const name of Object.keys(given)) {
    if (!known.has(name)) problems.push(`Workspace parameters: ${name} is not a parameter of template ${templateName} (its parameters: ${[...known.keys()].join(", ") || "none"})`);
  }
  for (const parameter of resolved.parameters) {
    if (parameter.required && given[parameter.name] === undefined) problems.push(`Workspace parameters: ${parameter.name} is required by template ${templateName}`);
  }
  return problems;
}
