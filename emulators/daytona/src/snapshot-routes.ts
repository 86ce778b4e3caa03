import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { HttpError, queryInt, type HttpContext, type Router, type VendorClock } from "@paperclip-sandbox/emulator-kit";
import { captureDisk } from "@paperclip-sandbox/sandbox-backend";
import { apiErrorEnvelope } from "./errors.js";
import type { Fleet } from "./fleet.js";
import type { SandboxRecord } from "./records.js";

interface SnapshotRecord {
  id: string;
  name: string;
  imageName: string | undefined;
  state: "active" | "inactive";
  createdAt: number;
  updatedAt: number;
  lastUsedAt: number | null;
  /** A snapshot of a sandbox (`POST /sandbox/{id}/snapshot`): its id and the copy of its disk. */
  source?: {
    sandboxId: string;
    dir: string;
    cpu: number;
    memory: number;
    disk: number;
  };
}

/** The organization's snapshots, shared by the registry routes and the fleet (which starts sandboxes from them). */
export interface SnapshotStore {
  /** An active snapshot of that name exists. */
  exists(name: string): boolean;
  /** The disk copy a sandbox made from this snapshot starts with; undefined for a registered (image) snapshot. */
  diskOf(name: string): string | undefined;
}

export interface SnapshotStoreOptions {
  clock: VendorClock;
  /** Where sandbox snapshots' disk copies are kept (one directory per snapshot, 0700). */
  dir: string;
  /** Names that exist from the start (the `snapshots` option), else the default one. */
  initial: readonly string[];
}

interface Store extends SnapshotStore {
  records: Map<string, SnapshotRecord>;
  add(
    name: string,
    made?: {
      imageName?: string;
      id?: string;
      source?: SnapshotRecord["source"];
    },
  ): SnapshotRecord;
  remove(record: SnapshotRecord): Promise<void>;
  dirFor(id: string): string;
  clock: VendorClock;
}

export function createSnapshotStore(options: SnapshotStoreOptions): Store {
  const records = new Map<string, SnapshotRecord>();
  const byName = (name: string) => [...records.values()].find((s) => s.name === name);
  const store: Store = {
    records,
    clock: options.clock,
    dirFor: (id) => join(options.dir, id),
    add(name, made = {}) {
      const now = options.clock.now();
      const { imageName, source } = made;
      const record: SnapshotRecord = {
        id: made.id ?? randomUUID(),
        name,
        imageName,
        state: "active",
        createdAt: now,
        updatedAt: now,
        lastUsedAt: null,
        ...(source ? { source } : {}),
      };
      records.set(record.id, record);
      return record;
    },
    async remove(record) {
      records.delete(record.id);
      if (record.source) await rm(record.source.dir, { recursive: true, force: true });
    },
    exists: (name) => byName(name)?.state === "active",
    diskOf(name) {
      const found = byName(name);
      if (found) found.lastUsedAt = options.clock.now();
      return found?.source?.dir;
    },
  };
  for (const name of options.initial) store.add(name);
  return store;
}

export interface SnapshotDeps {
  fleet: Fleet;
  store: Store;
  authorize(ctx: HttpContext): void;
  organizationId: string;
  /** The `Sandbox` DTO the snapshot call answers with. */
  sandboxDto(record: SandboxRecord): Record<string, unknown>;
}

const opts = { errorEnvelope: apiErrorEnvelope };

/** What the API accepts as a snapshot name (its image-name alphabet, no length bound). */
const SNAPSHOT_NAME = /^[a-zA-Z0-9_.\-:]+(\/[a-zA-Z0-9_.\-:]+)*(@sha256:[a-f0-9]{64})?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** `ListSnapshotsQuery`'s sort fields and directions (default `lastUsedAt` `desc`). */
const SORT_FIELDS = ["name", "state", "lastUsedAt", "createdAt"] as const;
const SORT_ORDERS = ["asc", "desc"] as const;

function oneOf<T extends string>(query: URLSearchParams, name: string, allowed: readonly T[], fallback: T): T {
  const raw = query.get(name);
  if (raw === null || raw === "") return fallback;
  if (!(allowed as readonly string[]).includes(raw)) throw new HttpError(400, `${name} must be one of the following values: ${allowed.join(", ")}`);
  return raw as T;
}

/**
 * The snapshot registry (`SnapshotsApi`) and the snapshot of a sandbox (`SandboxApi.createSandboxSnapshot`).
 * A registered snapshot is a name only (every sandbox runs on the same image tree here), `active` at
 * once; a sandbox's snapshot is a copy of its writable trees (the backend's `captureDisk`), taken
 * while the sandbox is `snapshotting`, after which it returns to its state; a sandbox created from it
 * starts with that copy. `SnapshotDto` fields from `@daytona/api-client`.
 */
export function registerSnapshotRoutes(router: Router, deps: SnapshotDeps): void {
  const { store } = deps;
  // `GET /snapshots/{id}` takes an id or a name; the operations that change one take its id only
  // (the SDK resolves a name with a get first).
  const byIdOrName = (ctx: HttpContext) => {
    deps.authorize(ctx);
    const key = ctx.params.id!;
    const found = [...store.records.values()].find((s) => s.name === key) ?? (UUID.test(key) ? store.records.get(key) : undefined);
    if (!found) throw new HttpError(404, `Snapshot ${key} not found`);
    return found;
  };
  const byId = (ctx: HttpContext) => {
    deps.authorize(ctx);
    const key = ctx.params.id!;
    if (!UUID.test(key)) throw new HttpError(400, "Validation failed (uuid is expected)");
    const found = store.records.get(key);
    if (!found) throw new HttpError(404, `Snapshot ${key} not found`);
    return found;
  };
  const named = (raw: unknown): string => {
    if (typeof raw !== "string" || raw.trim() === "") throw new HttpError(400, "name must be a non-empty string");
    if (!SNAPSHOT_NAME.test(raw)) throw new HttpError(400, "Invalid snapshot name format. May contain letters, digits, dots, colons, and dashes");
    if ([...store.records.values()].some((s) => s.name === raw)) throw new HttpError(409, `Snapshot with name "${raw}" already exists`);
    return raw;
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
    cpu: s.source?.cpu ?? 1,
    gpu: 0,
    mem: s.source?.memory ?? 1,
    disk: s.source?.disk ?? 3,
    errorReason: null,
    createdAt: new Date(s.createdAt).toISOString(),
    updatedAt: new Date(s.updatedAt).toISOString(),
    lastUsedAt: s.lastUsedAt === null ? null : new Date(s.lastUsedAt).toISOString(),
    sourceSandboxId: s.source?.sandboxId ?? null,
    sandboxClass: "linux-vm",
  });

  router.get(
    "/api/snapshots",
    (ctx) => {
      deps.authorize(ctx);
      const page = queryInt(ctx.query, "page", { min: 1 }) ?? 1;
      const limit = queryInt(ctx.query, "limit", { min: 1, max: 200 }) ?? 100;
      const name = ctx.query.get("name")?.toLowerCase();
      const sourceSandboxId = ctx.query.get("sourceSandboxId");
      const sort = oneOf(ctx.query, "sort", SORT_FIELDS, "lastUsedAt");
      const order = oneOf(ctx.query, "order", SORT_ORDERS, "desc");
      const all = [...store.records.values()]
        .filter((s) => !name || s.name.toLowerCase().includes(name))
        .filter((s) => !sourceSandboxId || s.source?.sandboxId === sourceSandboxId)
        .sort((a, b) => compareBy(a, b, sort, order) || b.createdAt - a.createdAt);
      return {
        items: all.slice((page - 1) * limit, page * limit).map(dto),
        total: all.length,
        page,
        totalPages: Math.ceil(all.length / limit),
      };
    },
    opts,
  );
  router.post(
    "/api/snapshots",
    async (ctx) => {
      deps.authorize(ctx);
      const body = await ctx.readJson<{
        name?: unknown;
        imageName?: unknown;
      }>();
      const name = named(body?.name);
      return dto(store.add(name, typeof body?.imageName === "string" ? { imageName: body.imageName } : {}));
    },
    opts,
  );
  router.get("/api/snapshots/:id", (ctx) => dto(byIdOrName(ctx)), opts);
  router.delete(
    "/api/snapshots/:id",
    async (ctx) => {
      await store.remove(byId(ctx));
      ctx.send(200);
    },
    opts,
  );
  router.post(
    "/api/snapshots/:id/activate",
    (ctx) => {
      const snapshot = byId(ctx);
      if (snapshot.state !== "active") {
        snapshot.state = "active";
        snapshot.updatedAt = store.clock.now();
      }
      return dto(snapshot);
    },
    opts,
  );
  // 204, no body; an inactive one stays so.
  router.post(
    "/api/snapshots/:id/deactivate",
    (ctx) => {
      const snapshot = byId(ctx);
      if (snapshot.state !== "inactive") {
        snapshot.state = "inactive";
        snapshot.updatedAt = store.clock.now();
      }
      ctx.send(204);
    },
    opts,
  );

  // `CreateSandboxSnapshot {name}` → the `Sandbox` DTO, `snapshotting` until the copy is made (the SDK
  // then polls the sandbox until it has left that state).
  router.post(
    "/api/sandbox/:sandboxIdOrName/snapshot",
    async (ctx) => {
      deps.authorize(ctx);
      const idOrName = ctx.params.sandboxIdOrName!;
      const sandbox = deps.fleet.find(idOrName);
      if (!sandbox || sandbox.state === "destroyed") throw new HttpError(404, `Sandbox with ID or name ${idOrName} not found`);
      const body = await ctx.readJson<{ name?: unknown }>();
      const name = named(body?.name);
      const id = randomUUID();
      const dir = store.dirFor(id);
      await deps.fleet.snapshot(sandbox, async (jail) => {
        await captureDisk(jail, dir);
        store.add(name, {
          id,
          source: {
            sandboxId: sandbox.id,
            dir,
            cpu: sandbox.cpu,
            memory: sandbox.memory,
            disk: sandbox.disk,
          },
        });
      });
      return deps.sandboxDto(sandbox);
    },
    opts,
  );
}

/** `ListSnapshotsQuery`'s order: by the field, never-used (null `lastUsedAt`) last either way. */
function compareBy(a: SnapshotRecord, b: SnapshotRecord, field: (typeof SORT_FIELDS)[number], order: (typeof SORT_ORDERS)[number]): number {
  const sign = order === "asc" ? 1 : -1;
  switch (field) {
    case "name":
      return sign * a.name.localeCompare(b.name);
    case "state":
      return sign * a.state.localeCompare(b.state);
    case "createdAt":
      return sign * (a.createdAt - b.createdAt);
    case "lastUsedAt":
      if (a.lastUsedAt === b.lastUsedAt) return 0;
      if (a.lastUsedAt === null) return 1;
      if (b.lastUsedAt === null) return -1;
      return sign * (a.lastUsedAt - b.lastUsedAt);
  }
}
