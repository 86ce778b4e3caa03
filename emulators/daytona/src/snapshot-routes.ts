import { randomUUID } from "node:crypto";
import { HttpError, queryInt, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { apiErrorEnvelope } from "./errors.js";
import type { Fleet } from "./fleet.js";

interface SnapshotRecord {
  id: string;
  name: string;
  imageName: string | undefined;
  state: "active" | "inactive";
  createdAt: number;
  updatedAt: number;
  lastUsedAt: number | null;
}

export interface SnapshotDeps {
  fleet: Fleet;
  authorize(ctx: HttpContext): void;
  organizationId: string;
  /** Names that exist from the start (the `snapshots` option), else the default one. */
  initial: readonly string[];
}

const opts = { errorEnvelope: apiErrorEnvelope };

/**
 * The snapshot registry (`SnapshotsApi`): names only, as every sandbox runs on the same tree here;
 * a registered snapshot is `active` at once (no build), can be deactivated, activated and removed,
 * and a sandbox made from it records its name. `SnapshotDto` fields from `@daytona/api-client`.
 */
export function registerSnapshotRoutes(router: Router, deps: SnapshotDeps): { exists(name: string): boolean } {
  const snapshots = new Map<string, SnapshotRecord>();
  const add = (name: string, imageName?: string) => {
    const now = deps.fleet.clock.now();
    const record: SnapshotRecord = { id: randomUUID(), name, imageName, state: "active", createdAt: now, updatedAt: now, lastUsedAt: null };
    snapshots.set(record.id, record);
    return record;
  };
  for (const name of deps.initial) add(name);
  const byIdOrName = (ctx: HttpContext) => {
    deps.authorize(ctx);
    const key = ctx.params.id!;
    const found = snapshots.get(key) ?? [...snapshots.values()].find((s) => s.name === key);
    if (!found) throw new HttpError(404, `Snapshot with ID or name ${key} not found`);
    return found;
  };
  const dto = (s: SnapshotRecord) => ({
    id: s.id,
    organizationId: deps.organizationId,
    general: false,
    name: s.name,
    ...(s.imageName ? { imageName: s.imageName } : {}),
    state: s.state,
    size: null,
    entrypoint: null,
    cpu: 1,
    gpu: 0,
    mem: 1,
    disk: 3,
    errorReason: null,
    createdAt: new Date(s.createdAt).toISOString(),
    updatedAt: new Date(s.updatedAt).toISOString(),
    lastUsedAt: s.lastUsedAt === null ? null : new Date(s.lastUsedAt).toISOString(),
    sourceSandboxId: null,
    sandboxClass: "linux-vm",
  });

  router.get(
    "/api/snapshots",
    (ctx) => {
      deps.authorize(ctx);
      const page = queryInt(ctx.query, "page", { min: 1 }) ?? 1;
      const limit = queryInt(ctx.query, "limit", { min: 1, max: 200 }) ?? 100;
      const name = ctx.query.get("name");
      const all = [...snapshots.values()].filter((s) => !name || s.name.includes(name)).sort((a, b) => b.createdAt - a.createdAt);
      return { items: all.slice((page - 1) * limit, page * limit).map(dto), total: all.length, page, totalPages: Math.max(1, Math.ceil(all.length / limit)) };
    },
    opts,
  );
  router.post(
    "/api/snapshots",
    async (ctx) => {
      deps.authorize(ctx);
      const body = await ctx.readJson<{ name?: unknown; imageName?: unknown }>();
      if (typeof body?.name !== "string" || body.name === "") throw new HttpError(400, "name must be a non-empty string");
      if ([...snapshots.values()].some((s) => s.name === body.name)) throw new HttpError(409, `Snapshot with name ${body.name} already exists`);
      return dto(add(body.name, typeof body.imageName === "string" ? body.imageName : undefined));
    },
    opts,
  );
  router.get("/api/snapshots/:id", (ctx) => dto(byIdOrName(ctx)), opts);
  router.delete(
    "/api/snapshots/:id",
    (ctx) => {
      snapshots.delete(byIdOrName(ctx).id);
      ctx.send(200);
    },
    opts,
  );
  for (const [path, state] of [
    ["activate", "active"],
    ["deactivate", "inactive"],
  ] as const) {
    router.post(
      `/api/snapshots/:id/${path}`,
      (ctx) => {
        const snapshot = byIdOrName(ctx);
        snapshot.state = state;
        snapshot.updatedAt = deps.fleet.clock.now();
        return dto(snapshot);
      },
      opts,
    );
  }
  return {
    exists: (name) => [...snapshots.values()].some((s) => s.name === name && s.state === "active"),
  };
}
