/** The REST surface of `/api/v2` that a client of workspaces uses. */
import { HttpError, queryInt, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { requireSession } from "./auth.js";
import type { Deployment } from "./deployment.js";
import { coderError } from "./errors.js";
import { agentJson, buildJson, buildStatus, latestBuild, organizationJson, parameterJson, templateJson, templateVersionJson, userJson, workspaceJson, type WorkspaceRecord } from "./model.js";

export const CODER_VERSION = "v2.24.1+emulated";

export interface ApiDeps {
  deployment: Deployment;
  sessionToken: string;
  origin: () => string;
}

/** `?include_deleted=` as Coder parses it: a boolean, else 400 naming the parameter. */
function includeDeleted(ctx: HttpContext): boolean {
  const raw = ctx.query.get("include_deleted") ?? ctx.query.get("deleted");
  if (raw === null || raw === "") return false;
  if (raw === "true" || raw === "1") return true;
  if (raw === "false" || raw === "0") return false;
  throw coderError(400, `Invalid boolean value ${JSON.stringify(raw)} for "include_deleted" query param.`, { validations: [{ field: "include_deleted", detail: "Must be a valid boolean" }] });
}

export function registerApiRoutes(router: Router, deps: ApiDeps): void {
  const { deployment } = deps;
  const views = deployment.views;
  const auth = (ctx: HttpContext) => requireSession(ctx.headers, ctx.query, deps.sessionToken);
  const body = async (ctx: HttpContext): Promise<Record<string, unknown>> => {
    const value = await ctx.readJson<unknown>();
    if (!value || typeof value !== "object" || Array.isArray(value)) throw coderError(400, "Request body must be valid JSON.");
    return value as Record<string, unknown>;
  };

  router.get("/api/v2/buildinfo", () => ({
    external_url: "https://github.com/coder/coder",
    version: CODER_VERSION,
    dashboard_url: deps.origin(),
    workspace_proxy: false,
    agent_api_version: "2.4",
    provisioner_api_version: "1.4",
    upgrade_message: "",
    deployment_id: deployment.organization.id,
    webpush_public_key: "",
    telemetry: false,
  }));

  router.get("/api/v2/users/:user", (ctx) => {
    auth(ctx);
    return userJson(deployment.requireUser(ctx.params.user!), [deployment.organization.id]);
  });

  router.get("/api/v2/users/:user/organizations", (ctx) => {
    auth(ctx);
    deployment.requireUser(ctx.params.user!);
    return [organizationJson(deployment.organization)];
  });

  router.get("/api/v2/organizations/:org", (ctx) => {
    auth(ctx);
    return organizationJson(deployment.requireOrganization(ctx.params.org!));
  });

  router.get("/api/v2/organizations/:org/templates", (ctx) => {
    auth(ctx);
    deployment.requireOrganization(ctx.params.org!);
    return deployment.templates.map((template) => templateJson(template, views));
  });

  router.get("/api/v2/organizations/:org/templates/:name", (ctx) => {
    auth(ctx);
    deployment.requireOrganization(ctx.params.org!);
    return templateJson(deployment.templateByName(ctx.params.name!), views);
  });

  router.get("/api/v2/templates/:id", (ctx) => {
    auth(ctx);
    return templateJson(views.template(ctx.params.id!), views);
  });

  router.get("/api/v2/templateversions/:id", (ctx) => {
    auth(ctx);
    return templateVersionJson(deployment.templateByVersion(ctx.params.id!), views);
  });

  router.get("/api/v2/templateversions/:id/rich-parameters", (ctx) => {
    auth(ctx);
    return (deployment.templateByVersion(ctx.params.id!).spec.parameters ?? []).map(parameterJson);
  });

  const create = async (ctx: HttpContext) => {
    auth(ctx);
    deployment.requireUser(ctx.params.user!);
    if (ctx.params.org !== undefined) deployment.requireOrganization(ctx.params.org);
    const input = await body(ctx);
    const workspace = deployment.createWorkspace({
      name: input.name,
      templateId: input.template_id,
      templateVersionId: input.template_version_id,
      parameters: input.rich_parameter_values,
      ttlMs: input.ttl_ms,
      autostartSchedule: input.autostart_schedule,
      automaticUpdates: input.automatic_updates,
    });
    ctx.sendJson(201, workspaceJson(workspace, views));
  };
  router.post("/api/v2/users/:user/workspaces", create);
  router.post("/api/v2/organizations/:org/members/:user/workspaces", create);

  router.get("/api/v2/workspaces", (ctx) => {
    auth(ctx);
    const filter = parseWorkspaceQuery(ctx.query.get("q") ?? "");
    const matching = deployment.allWorkspaces().filter((workspace) => matches(workspace, filter, deployment));
    const offset = queryInt(ctx.query, "offset") ?? 0;
    const limit = queryInt(ctx.query, "limit") ?? 0;
    const page = limit > 0 ? matching.slice(offset, offset + limit) : matching.slice(offset);
    return { workspaces: page.map((workspace) => workspaceJson(workspace, views)), count: matching.length };
  });

  router.get("/api/v2/workspaces/:id", (ctx) => {
    auth(ctx);
    return workspaceJson(deployment.workspace(ctx.params.id!, includeDeleted(ctx)), views);
  });

  router.get("/api/v2/users/:user/workspace/:name", (ctx) => {
    auth(ctx);
    deployment.requireUser(ctx.params.user!);
    return workspaceJson(deployment.workspaceByName(ctx.params.name!, includeDeleted(ctx)), views);
  });

  router.put("/api/v2/workspaces/:id/extend", async (ctx) => {
    auth(ctx);
    const workspace = deployment.workspace(ctx.params.id!);
    deployment.extend(workspace, (await body(ctx)).deadline);
    return { message: `Deadline updated to ${latestBuild(workspace).deadline}.` };
  });

  router.get("/api/v2/workspaces/:id/builds", (ctx) => {
    auth(ctx);
    const workspace = deployment.workspace(ctx.params.id!, true);
    return [...workspace.builds].reverse().map((build) => buildJson(build, workspace, views));
  });

  router.post("/api/v2/workspaces/:id/builds", async (ctx) => {
    auth(ctx);
    const workspace = deployment.workspace(ctx.params.id!);
    const input = await body(ctx);
    if (input.dry_run === true) {
      ctx.record.markUnserved("refused");
      throw coderError(400, "Dry runs are not supported by the emulator.");
    }
    const build = deployment.createBuild(workspace, {
      transition: input.transition,
      templateVersionId: input.template_version_id,
      parameters: input.rich_parameter_values,
      orphan: input.orphan,
    });
    ctx.sendJson(201, buildJson(build, workspace, views));
  });

  router.get("/api/v2/workspacebuilds/:id", (ctx) => {
    auth(ctx);
    const { build, workspace } = deployment.build(ctx.params.id!);
    return buildJson(build, workspace, views);
  });

  router.get("/api/v2/workspacebuilds/:id/parameters", (ctx) => {
    auth(ctx);
    return deployment.build(ctx.params.id!).build.parameters;
  });

  router.patch("/api/v2/workspacebuilds/:id/cancel", (ctx) => {
    auth(ctx);
    const { build, workspace } = deployment.build(ctx.params.id!);
    deployment.cancel(build, workspace);
    return { message: "Job has been marked as canceled..." };
  });

  router.get("/api/v2/users/:user/workspace/:name/builds/:number", (ctx) => {
    auth(ctx);
    deployment.requireUser(ctx.params.user!);
    const workspace = deployment.workspaceByName(ctx.params.name!, true);
    const build = workspace.builds.find((each) => String(each.number) === ctx.params.number);
    if (!build) throw new HttpError(404, "Resource not found or you do not have access to this resource");
    return buildJson(build, workspace, views);
  });

  router.get("/api/v2/workspaceagents/:id", (ctx) => {
    auth(ctx);
    return agentJson(deployment.agent(ctx.params.id!).agent);
  });
}

interface WorkspaceQuery {
  owner?: string;
  name?: string;
  template?: string;
  status?: string;
  deleted: boolean;
  id?: string;
}

/** `q` terms: `owner:`, `name:` (substring), `template:`, `status:`, `deleted:`, `id:`; bare words are names. Quotes are stripped. */
function parseWorkspaceQuery(q: string): WorkspaceQuery {
  const query: WorkspaceQuery = { deleted: false };
  for (const term of q.match(/(?:[^\s"]+|"[^"]*")+/g) ?? []) {
    const colon = term.indexOf(":");
    const key = colon < 0 ? "name" : term.slice(0, colon).toLowerCase();
    const value = (colon < 0 ? term : term.slice(colon + 1)).replace(/^"|"$/g, "");
    if (key === "owner") query.owner = value;
    else if (key === "name") query.name = value;
    else if (key === "template") query.template = value;
    else if (key === "status") query.status = value;
    else if (key === "id") query.id = value;
    else if (key === "deleted") query.deleted = value === "true";
    else throw coderError(400, "Invalid workspace search query.", { validations: [{ field: key, detail: `"${key}" is not a valid query param` }] });
  }
  return query;
}

function matches(workspace: WorkspaceRecord, query: WorkspaceQuery, deployment: Deployment): boolean {
  if (workspace.deleted !== query.deleted) return false;
  if (query.owner && query.owner !== "me" && query.owner !== deployment.user.username) return false;
  if (query.name && !workspace.name.toLowerCase().includes(query.name.toLowerCase())) return false;
  if (query.template && deployment.views.template(workspace.templateId).spec.name !== query.template) return false;
  if (query.status && buildStatus(latestBuild(workspace)) !== query.status) return false;
  if (query.id && workspace.id !== query.id) return false;
  return true;
}
