import { HttpError, paginate, queryInt, queryList, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { apiErrorEnvelope } from "./errors.js";
import type { CreateRequest, Fleet } from "./fleet.js";
import { sandboxDto, sandboxListItem, type SandboxRecord } from "./records.js";

export interface ApiDeps {
  fleet: Fleet;
  authorize(ctx: HttpContext): void;
  /** The toolbox base the DTOs carry (`toolboxProxyUrl`); the SDK appends `/<sandboxId>`. */
  toolboxUrl(): string;
}

const opts = { errorEnvelope: apiErrorEnvelope };

/** The control plane under `/api` (shapes of `@daytona/api-client` `SandboxApi`). */
export function registerApiRoutes(router: Router, deps: ApiDeps): void {
  const { fleet } = deps;
  const dto = (record: SandboxRecord) => sandboxDto(record, deps.toolboxUrl());
  const found = (ctx: HttpContext): SandboxRecord => {
    deps.authorize(ctx);
    const idOrName = ctx.params.sandboxIdOrName!;
    const record = fleet.find(idOrName);
    if (!record || record.state === "destroyed") throw new HttpError(404, `Sandbox with ID or name ${idOrName} not found`);
    return record;
  };

  router.post(
    "/api/sandbox",
    async (ctx) => {
      deps.authorize(ctx);
      const record = await fleet.create(createRequest(await ctx.readJson<Record<string, unknown>>()));
      ctx.sendJson(200, dto(record));
    },
    opts,
  );

  router.get(
    "/api/sandbox",
    (ctx) => {
      deps.authorize(ctx);
      const labels = labelFilter(ctx.query.get("labels"));
      const states = new Set(queryList(ctx.query, "states"));
      const matching = fleet
        .all()
        .filter((record) => record.state !== "destroyed")
        .filter((record) => Object.entries(labels).every(([key, value]) => record.labels[key] === value))
        .filter((record) => states.size === 0 || states.has(record.state));
      const page = paginate(matching, { cursor: ctx.query.get("cursor"), limit: queryInt(ctx.query, "limit") }, { key: (r) => `${r.createdAt}|${r.id}`, defaultLimit: 100, maxLimit: 200 });
      return { items: page.items.map((record) => sandboxListItem(record, deps.toolboxUrl())), nextCursor: page.nextCursor ?? null };
    },
    opts,
  );

  router.get("/api/sandbox/:sandboxIdOrName", (ctx) => dto(found(ctx)), opts);
  router.get("/api/sandbox/:sandboxIdOrName/toolbox-proxy-url", (ctx) => (found(ctx), { url: deps.toolboxUrl() }), opts);

  const action = (path: string, act: (record: SandboxRecord, ctx: HttpContext) => Promise<void>) =>
    router.post(
      `/api/sandbox/:sandboxIdOrName/${path}`,
      async (ctx) => {
        const record = found(ctx);
        await act(record, ctx);
        return dto(record);
      },
      opts,
    );
  action("start", (record) => fleet.start(record));
  action("stop", (record) => fleet.stop(record));
  action("pause", (record) => fleet.pause(record));
  action("archive", (record) => fleet.archive(record));
  action("last-activity", async (record) => fleet.touch(record));
  action("recover", async (record) => {
    // Only a sandbox in the error state can be recovered; the emulator's jails never need it otherwise.
    if (record.state !== "error") throw new HttpError(400, "Sandbox is not in an error state");
    record.errorReason = undefined;
    record.state = "stopped";
    await fleet.start(record);
  });
  action("resize", async (record, ctx) => {
    const body = (await ctx.readJson<Record<string, unknown>>()) ?? {};
    await fleet.resize(record, { cpu: optionalNumber(body, "cpu", 1), memory: optionalNumber(body, "memory", 1), disk: optionalNumber(body, "disk", 1) });
  });
  action("public/:isPublic", async (record, ctx) => {
    if (ctx.params.isPublic !== "true" && ctx.params.isPublic !== "false") throw new HttpError(400, "isPublic must be true or false");
    record.public = ctx.params.isPublic === "true";
  });
  const interval = (path: string, min: number, apply: (record: SandboxRecord, value: number) => void) =>
    action(`${path}/:interval`, async (record, ctx) => {
      const value = Number(ctx.params.interval);
      if (!Number.isInteger(value) || value < min) throw new HttpError(400, `${path} interval: must be an integer >= ${min}`);
      apply(record, value);
    });
  interval("autostop", 0, (record, value) => {
    record.autoStopInterval = value;
    if (value > 0) record.autoPauseInterval = 0; // the two are mutually exclusive
  });
  interval("autopause", 0, (record, value) => {
    record.autoPauseInterval = value;
    if (value > 0) record.autoStopInterval = 0;
  });
  action("ttl/:ttlMinutes", async (record, ctx) => {
    const value = Number(ctx.params.ttlMinutes);
    if (!Number.isInteger(value) || value < 0) throw new HttpError(400, "ttlMinutes must be an integer >= 0");
    record.autoDestroyAt = value === 0 ? undefined : fleet.clock.now() + fleet.clock.duration(value * 60_000);
  });
  interval("autoarchive", 0, (record, value) => (record.autoArchiveInterval = value));
  interval("autodelete", -1, (record, value) => (record.autoDeleteInterval = value));

  router.put(
    "/api/sandbox/:sandboxIdOrName/labels",
    async (ctx) => {
      const record = found(ctx);
      const body = await ctx.readJson<{ labels?: unknown }>();
      record.labels = stringMap("labels", body?.labels);
      return { labels: record.labels };
    },
    opts,
  );

  router.delete(
    "/api/sandbox/:sandboxIdOrName",
    async (ctx) => {
      const record = found(ctx);
      await fleet.remove(record);
      return dto(record);
    },
    opts,
  );
}

function labelFilter(raw: string | null): Record<string, string> {
  if (raw === null || raw === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new HttpError(400, "labels: must be a JSON object of strings");
  }
  return stringMap("labels", parsed);
}

function stringMap(field: string, value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value) || Object.values(value).some((v) => typeof v !== "string")) {
    throw new HttpError(400, `${field}: must be an object of strings`);
  }
  return { ...(value as Record<string, string>) };
}

function optionalNumber(body: Record<string, unknown>, field: string, min: number): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min) throw new HttpError(400, `${field} must be an integer >= ${min}`);
  return value;
}

/** The `CreateSandbox` body, checked as the API does for the fields this emulator honours. */
function createRequest(body: Record<string, unknown> | undefined): CreateRequest {
  if (!body || typeof body !== "object") throw new HttpError(400, "request body must be a JSON object");
  const snapshot = typeof body.snapshot === "string" && body.snapshot !== "" ? body.snapshot : undefined;
  const buildInfo = body.buildInfo as { dockerfileContent?: unknown } | undefined;
  const dockerfile = typeof buildInfo?.dockerfileContent === "string" ? buildInfo.dockerfileContent : undefined;
  if (snapshot !== undefined && dockerfile !== undefined) throw new HttpError(400, "Cannot specify both snapshot and buildInfo");
  const resources = { cpu: optionalNumber(body, "cpu", 1), memory: optionalNumber(body, "memory", 1), disk: optionalNumber(body, "disk", 1), gpu: optionalNumber(body, "gpu", 0) };
  if (dockerfile === undefined && Object.values(resources).some((value) => value !== undefined)) {
    throw new HttpError(400, "Cannot specify Sandbox resources when using a snapshot");
  }
  const autoStopInterval = optionalNumber(body, "autoStopInterval", 0);
  const autoPauseInterval = optionalNumber(body, "autoPauseInterval", 0);
  const autoArchiveInterval = optionalNumber(body, "autoArchiveInterval", 0);
  const autoDeleteInterval = optionalNumber(body, "autoDeleteInterval", -1);
  const ttlMinutes = optionalNumber(body, "ttlMinutes", 0);
  return {
    ...(typeof body.name === "string" && body.name !== "" ? { name: body.name } : {}),
    ...(snapshot === undefined ? {} : { snapshot }),
    ...(dockerfile === undefined ? {} : { dockerfile }),
    env: stringMap("env", body.env),
    labels: stringMap("labels", body.labels),
    ...(typeof body.target === "string" && body.target !== "" ? { target: body.target } : {}),
    ...Object.fromEntries(Object.entries(resources).filter(([, value]) => value !== undefined)),
    ...(autoStopInterval === undefined ? {} : { autoStopInterval }),
    ...(autoPauseInterval === undefined ? {} : { autoPauseInterval }),
    ...(typeof body.public === "boolean" ? { public: body.public } : {}),
    ...(autoArchiveInterval === undefined ? {} : { autoArchiveInterval }),
    ...(autoDeleteInterval === undefined ? {} : { autoDeleteInterval }),
    ...(ttlMinutes === undefined ? {} : { ttlMinutes }),
  };
}
