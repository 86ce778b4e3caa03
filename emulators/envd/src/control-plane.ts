import { HttpError, queryInt, requireApiKey, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { noDelay } from "./envd-access.js";
import type { ResolvedEnvdOptions } from "./options.js";
import type { EnvdSandbox, SandboxRegistry } from "./sandboxes.js";
import type { SnapshotTemplates } from "./snapshots.js";

/** E2B's (and Novita's) longest sandbox life, in seconds: 24 hours. */
const MAX_TIMEOUT_SECONDS = 24 * 60 * 60;
const DEFAULT_TIMEOUT_SECONDS = 300;
const MAX_LIST_LIMIT = 100;

interface CreateBody {
  templateID?: unknown;
  timeout?: unknown;
  metadata?: unknown;
  envVars?: unknown;
  secure?: unknown;
  autoPause?: unknown;
  allow_internet_access?: unknown;
}

/**
 * The control-plane REST API both SDKs call (request and response shapes from their generated
 * `paths`/`components` typings): e2b's v2 create and connect, Novita's v1 create and connect (its
 * non-legacy path), get, list with a metadata filter and `X-Next-Token` paging, set timeout, pause
 * and kill. Errors always carry the JSON body `{code, message}`: both SDKs read `code`, and an
 * empty error body is success to Novita's.
 */
export function controlPlaneRoutes(router: Router, deps: { sandboxes: SandboxRegistry; snapshots: SnapshotTemplates; options: ResolvedEnvdOptions; apiKey: string }): void {
  const { sandboxes, options, apiKey } = deps;
  const auth = (ctx: HttpContext) => (noDelay(ctx), requireApiKey(ctx, { header: "x-api-key", accept: [apiKey], missingMessage: "missing API key (X-API-KEY)", invalidMessage: "invalid API key" }));

  const create = async (ctx: HttpContext, dialect: "v1" | "v2") => {
    auth(ctx);
    const body = (await ctx.readJson<CreateBody>()) ?? {};
    const templateId = body.templateID;
    if (typeof templateId !== "string" || templateId === "") throw new HttpError(400, "templateID: required");
    const timeoutSeconds = timeoutOf(body.timeout, DEFAULT_TIMEOUT_SECONDS);
    const metadata = stringMap(body.metadata, "metadata");
    const envVars = stringMap(body.envVars, "envVars");
    // A snapshot template starts with its sandbox's copied trees.
    const snapshot = options.templates.has(templateId) ? undefined : deps.snapshots.find(templateId);
    if (!options.templates.has(templateId) && !snapshot) throw new HttpError(404, `template '${templateId}' not found`);
    if (sandboxes.size >= options.maxSandboxes) {
      throw new HttpError(429, `you have reached the maximum number of concurrent sandboxes (${options.maxSandboxes}); kill some before creating more`);
    }
    // v2 (e2b) has no `secure` field and always hands out an access token; v1 (Novita) asks for one.
    const secure = dialect === "v2" ? true : body.secure === undefined ? false : booleanOf(body.secure, "secure");
    const sandbox = await sandboxes.create({
      templateId,
      timeoutSeconds,
      metadata,
      envVars,
      secure,
      autoPause: body.autoPause === undefined ? false : booleanOf(body.autoPause, "autoPause"),
      allowInternetAccess: body.allow_internet_access === undefined ? true : booleanOf(body.allow_internet_access, "allow_internet_access"),
      ...(snapshot ? { disk: snapshot.dir } : {}),
    });
    ctx.sendJson(201, sandboxView(sandbox, options));
  };
  router.post("/v2/sandboxes", (ctx) => create(ctx, "v2"));
  router.post("/sandboxes", (ctx) => create(ctx, "v1"));

  const list = (ctx: HttpContext, v2: boolean) => {
    auth(ctx);
    const filter = metadataFilter(ctx.query.get("metadata"));
    const states = v2 ? (ctx.query.get("state")?.split(",").filter(Boolean) ?? ["running", "paused"]) : ["running"];
    for (const state of states) if (state !== "running" && state !== "paused") throw new HttpError(400, `state: unknown value ${JSON.stringify(state)}`);
    const limit = Math.min(queryInt(ctx.query, "limit", { min: 1, max: MAX_LIST_LIMIT }) ?? MAX_LIST_LIMIT, MAX_LIST_LIMIT);
    const matching = sandboxes
      .list()
      .filter((s) => states.includes(s.state) && Object.entries(filter).every(([key, value]) => s.metadata[key] === value))
      .sort((a, b) => a.startedAt - b.startedAt || a.id.localeCompare(b.id));
    const after = ctx.query.get("nextToken");
    const from = after ? matching.findIndex((s) => s.id === decodeToken(after)) + 1 : 0;
    if (after && from === 0) throw new HttpError(400, "nextToken: unknown or expired");
    const page = matching.slice(from, from + limit);
    const more = v2 && from + limit < matching.length;
    ctx.sendJson(
      200,
      page.map((s) => listedView(s, options)),
      more ? { "x-next-token": encodeToken(page[page.length - 1]!.id) } : {},
    );
  };
  router.get("/v2/sandboxes", (ctx) => list(ctx, true));
  router.get("/sandboxes", (ctx) => list(ctx, false));

  router.get("/sandboxes/:id", (ctx) => {
    auth(ctx);
    const sandbox = found(sandboxes.get(ctx.params.id!), ctx.params.id!);
    return { ...detailView(sandbox, options) };
  });

  router.post("/sandboxes/:id/timeout", async (ctx) => {
    auth(ctx);
    const body = ((await ctx.readJson<{ timeout?: unknown }>()) ?? {}) as { timeout?: unknown };
    if (body.timeout === undefined) throw new HttpError(400, "timeout: required");
    const seconds = timeoutOf(body.timeout, DEFAULT_TIMEOUT_SECONDS);
    const sandbox = await sandboxes.setTimeout(ctx.params.id!, seconds);
    found(sandbox, ctx.params.id!);
    ctx.send(204);
  });

  router.post("/sandboxes/:id/pause", async (ctx) => {
    auth(ctx);
    // e2b sends `{}` or `{memory}`; Novita sends no body at all.
    await ctx.readJson();
    const outcome = await sandboxes.pause(ctx.params.id!);
    if (outcome === undefined) throw notFound(ctx.params.id!);
    if (outcome === "already") throw new HttpError(409, `sandbox ${ctx.params.id} is already paused`);
    ctx.send(204);
  });

  const connect = async (ctx: HttpContext, v2: boolean) => {
    auth(ctx);
    const body = ((await ctx.readJson<{ timeout?: unknown; memory?: unknown }>()) ?? {}) as { timeout?: unknown; memory?: unknown };
    if (!v2 && body.timeout === undefined) throw new HttpError(400, "timeout: required");
    const seconds = timeoutOf(body.timeout, DEFAULT_TIMEOUT_SECONDS);
    const memory = body.memory === undefined ? undefined : booleanOf(body.memory, "memory");
    const outcome = await sandboxes.connect(ctx.params.id!, seconds, memory === undefined ? {} : { memory });
    if (!outcome) throw notFound(ctx.params.id!);
    ctx.sendJson(outcome.resumed ? 201 : 200, sandboxView(outcome.sandbox, options));
  };
  router.post("/v2/sandboxes/:id/connect", (ctx) => connect(ctx, true));
  router.post("/sandboxes/:id/connect", (ctx) => connect(ctx, false));

  // The older resume: a paused sandbox only (409 when it runs), the timeout from now (default 300 s).
  router.post("/sandboxes/:id/resume", async (ctx) => {
    auth(ctx);
    const body = ((await ctx.readJson<{ timeout?: unknown }>()) ?? {}) as { timeout?: unknown };
    const seconds = timeoutOf(body.timeout, DEFAULT_TIMEOUT_SECONDS);
    const current = sandboxes.get(ctx.params.id!);
    if (!current) throw notFound(ctx.params.id!);
    if (current.state === "running") throw new HttpError(409, `sandbox ${ctx.params.id} is already running`);
    const outcome = await sandboxes.connect(ctx.params.id!, seconds);
    if (!outcome) throw notFound(ctx.params.id!);
    ctx.sendJson(201, sandboxView(outcome.sandbox, options));
  });

  // Keep-alive: the sandbox lives at least `duration` seconds more (default 60), never shortened.
  router.post("/sandboxes/:id/refreshes", async (ctx) => {
    auth(ctx);
    const body = ((await ctx.readJson<{ duration?: unknown }>()) ?? {}) as { duration?: unknown };
    const seconds = timeoutOf(body.duration, 60);
    if (!(await sandboxes.refresh(ctx.params.id!, seconds))) throw notFound(ctx.params.id!);
    ctx.send(204);
  });

  router.delete("/sandboxes/:id", async (ctx) => {
    auth(ctx);
    if (!(await sandboxes.kill(ctx.params.id!))) throw notFound(ctx.params.id!);
    ctx.send(204);
  });
}

function sandboxView(sandbox: EnvdSandbox, options: ResolvedEnvdOptions) {
  return {
    sandboxID: sandbox.id,
    templateID: sandbox.templateId,
    alias: sandbox.templateId,
    clientID: sandbox.clientId,
    envdVersion: options.envdVersion,
    ...(sandbox.envdAccessToken !== undefined ? { envdAccessToken: sandbox.envdAccessToken } : {}),
    trafficAccessToken: null,
    domain: null,
  };
}

function listedView(sandbox: EnvdSandbox, options: ResolvedEnvdOptions) {
  return {
    sandboxID: sandbox.id,
    templateID: sandbox.templateId,
    alias: sandbox.templateId,
    clientID: sandbox.clientId,
    startedAt: new Date(sandbox.startedAt).toISOString(),
    endAt: new Date(sandbox.endAt).toISOString(),
    state: sandbox.state,
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: 1024,
    envdVersion: options.envdVersion,
    metadata: { ...sandbox.metadata },
    volumeMounts: [],
  };
}

function detailView(sandbox: EnvdSandbox, options: ResolvedEnvdOptions) {
  return {
    ...listedView(sandbox, options),
    ...(sandbox.envdAccessToken !== undefined ? { envdAccessToken: sandbox.envdAccessToken } : {}),
    domain: null,
    allowInternetAccess: sandbox.allowInternetAccess,
    lifecycle: { onTimeout: sandbox.autoPause ? "pause" : "kill", autoResume: false },
  };
}

function found<T>(value: T | undefined, id: string): T {
  if (value === undefined) throw notFound(id);
  return value;
}

function notFound(id: string): HttpError {
  return new HttpError(404, `sandbox "${id}" doesn't exist or you don't have access to it`);
}

function timeoutOf(value: unknown, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw new HttpError(400, "timeout: must be a whole number of seconds");
  if (value > MAX_TIMEOUT_SECONDS) throw new HttpError(400, `Timeout cannot be greater than ${MAX_TIMEOUT_SECONDS / 3600} hours`);
  return value;
}

function booleanOf(value: unknown, field: string): boolean {
  if (typeof value !== "boolean") throw new HttpError(400, `${field}: must be a boolean`);
  return value;
}

function stringMap(value: unknown, field: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw new HttpError(400, `${field}: must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== "string") throw new HttpError(400, `${field}.${key}: must be a string`);
    out[key] = item;
  }
  return out;
}

/** `?metadata=` is itself a URL-encoded query string (`k%3Dv%26k2%3Dv2`) of URL-encoded pairs. */
function metadataFilter(raw: string | null): Record<string, string> {
  if (!raw) return {};
  const out: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(raw)) out[decodeLenient(key)] = decodeLenient(value);
  return out;
}

function decodeLenient(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

const encodeToken = (id: string) => Buffer.from(id, "utf8").toString("base64url");
const decodeToken = (token: string) => Buffer.from(token, "base64url").toString("utf8");
