import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { HttpError, queryInt, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { captureDisk } from "@paperclip-sandbox/sandbox-backend";
import type { SandboxRegistry } from "./sandboxes.js";

/** The one team of the emulator: snapshot names are namespaced by its slug, as E2B namespaces them by team slug. */
const EMULATOR_TEAM = "emulator-team";
const TAG = "default";
/** E2B's identifier rules (`packages/shared/pkg/id`): an alias or namespace, and a tag. */
const IDENTIFIER = /^[a-z0-9-_]+$/;
const TAG_RULE = /^[a-z0-9-_.]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** The list's page size: default and most (E2B's `snapshotTemplatesMaxLimit`). */
const PAGE_LIMIT = 100;

interface SnapshotTemplate {
  /** The template id (`abc123`), what a nameless snapshot is known by. */
  id: string;
  /** The alias given at capture (`my-snapshot`), or none. */
  alias: string | undefined;
  sandboxId: string;
  /** The copy of the sandbox's writable trees. */
  dir: string;
  /** When it was made (its latest build): the list runs newest first. */
  createdAt: number;
}

/**
 * A snapshot name as E2B's API parses it (`id.ParseName`): `[namespace/]alias[:tag]`, trimmed and
 * lowercased; the namespace, when given, must be the team's. `tag` is undefined for `default`.
 */
function parseName(raw: string): { alias: string; tag: string | undefined } {
  const input = raw.trim();
  const [identifier = "", tagPart] = input.split(/:(.*)/s);
  let tag: string | undefined;
  if (tagPart !== undefined) {
    tag = tagPart.trim().toLowerCase();
    if (!TAG_RULE.test(tag)) throw new HttpError(400, `Invalid name: invalid tag: ${tagPart}`);
    if (tag === TAG) tag = undefined;
  }
  const slash = identifier.indexOf("/");
  const namespace = slash < 0 ? undefined : identifier.slice(0, slash).trim().toLowerCase();
  const alias = (slash < 0 ? identifier : identifier.slice(slash + 1)).trim().toLowerCase();
  if (namespace !== undefined && !IDENTIFIER.test(namespace)) throw new HttpError(400, `Invalid name: invalid namespace: ${identifier.slice(0, slash)}`);
  if (!IDENTIFIER.test(alias)) throw new HttpError(400, `Invalid name: invalid template ID: ${slash < 0 ? identifier : identifier.slice(slash + 1)}`);
  if (namespace !== undefined && namespace !== EMULATOR_TEAM) throw new HttpError(400, `namespace '${namespace}' must match your team '${EMULATOR_TEAM}'`);
  return { alias, tag };
}

/**
 * Snapshot templates (`POST /sandboxes/{id}/snapshots`): a copy of a sandbox's writable trees (the
 * backend's `captureDisk`, taken frozen) kept as a template a sandbox can be created from. Referred to
 * as E2B does: `team/alias:tag`, `team/alias`, `alias`, `alias:tag`, the template id or `id:tag`.
 */
export class SnapshotTemplates {
  private readonly templates = new Map<string, SnapshotTemplate>();
  private sequence = 0;

  constructor(private readonly dir: string) {}

  /** The template a `templateID` names, or undefined. */
  find(ref: string): SnapshotTemplate | undefined {
    const bare = ref.replace(/:[^/:]+$/, "");
    const alias = bare.startsWith(`${EMULATOR_TEAM}/`) ? bare.slice(EMULATOR_TEAM.length + 1) : bare;
    return this.templates.get(bare) ?? [...this.templates.values()].find((t) => t.alias !== undefined && t.alias === alias);
  }

  async capture(registry: SandboxRegistry, sandboxId: string, alias: string | undefined): Promise<SnapshotTemplate | undefined> {
    if (!registry.get(sandboxId)) return undefined;
    // A name already used gets a new build of the same template (E2B's rule): here, the copy is replaced.
    const existing = alias === undefined ? undefined : this.find(alias);
    const id = existing?.id ?? randomBytes(10).toString("hex");
    const dir = join(this.dir, `${id}-${randomBytes(4).toString("hex")}`);
    await registry.withSandbox(sandboxId, async (found) => void (await captureDisk(found.jail, dir)));
    if (existing) await rm(existing.dir, { recursive: true, force: true });
    // A strictly increasing stamp: two captures in one millisecond still list in the order made.
    const template = { id, alias, sandboxId, dir, createdAt: ++this.sequence };
    this.templates.set(id, template);
    return template;
  }

  async remove(ref: string): Promise<boolean> {
    const found = this.find(ref);
    if (!found) return false;
    this.templates.delete(found.id);
    await rm(found.dir, { recursive: true, force: true });
    return true;
  }

  /** Newest first (E2B orders by creation time, then id, descending). */
  list(filter: { sandboxId?: string; name?: string }): SnapshotTemplate[] {
    return [...this.templates.values()]
      .filter((t) => (!filter.sandboxId || t.sandboxId === filter.sandboxId) && (!filter.name || t.alias === filter.name || this.find(filter.name) === t))
      .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1));
  }
}

/** `SnapshotInfo` of the generated `components` typings: the ref with its tag, the names without. */
function snapshotInfo(template: SnapshotTemplate): { snapshotID: string; names: string[] } {
  const name = template.alias === undefined ? undefined : `${EMULATOR_TEAM}/${template.alias}`;
  return { snapshotID: `${name ?? template.id}:${TAG}`, names: name ? [name] : [] };
}

/** The list cursor: the last item's stamp and id, opaque to a client. */
const cursorOf = (t: SnapshotTemplate) => Buffer.from(`${t.createdAt}|${t.id}`).toString("base64url");
function afterCursor(token: string): (t: SnapshotTemplate) => boolean {
  const [stamp, id] = Buffer.from(token, "base64url").toString().split("|");
  const at = Number(stamp);
  if (!id || !Number.isInteger(at) || at <= 0) throw new HttpError(400, "Invalid next token");
  return (t) => t.createdAt < at || (t.createdAt === at && t.id < id);
}

/**
 * The routes: create a snapshot of a sandbox, list snapshots (cursor pages: `nextToken` in,
 * `X-Next-Token` out), check a template alias, delete one (a snapshot is a template).
 */
export function snapshotRoutes(router: Router, deps: { registry: SandboxRegistry; snapshots: SnapshotTemplates; templates: ReadonlySet<string>; auth(ctx: HttpContext): void }): void {
  const { registry, snapshots } = deps;
  router.post("/sandboxes/:id/snapshots", async (ctx) => {
    deps.auth(ctx);
    const body = ((await ctx.readJson<{ name?: unknown }>()) ?? {}) as { name?: unknown };
    if (body.name !== undefined && typeof body.name !== "string") throw new HttpError(400, "Error when parsing request: name must be a string");
    const parsed = body.name === undefined ? undefined : parseName(body.name);
    if (parsed?.tag !== undefined) {
      ctx.record.markUnserved("refused");
      throw new HttpError(501, "emulator limit: a snapshot template has one build, tagged default; other tags are not kept");
    }
    const template = await snapshots.capture(registry, ctx.params.id!, parsed?.alias);
    if (!template) throw new HttpError(404, `sandbox "${ctx.params.id}" doesn't exist or you don't have access to it`);
    ctx.sendJson(201, snapshotInfo(template));
  });
  router.get("/snapshots", (ctx) => {
    deps.auth(ctx);
    const limit = queryInt(ctx.query, "limit", { min: 1, max: PAGE_LIMIT }) ?? PAGE_LIMIT;
    const token = ctx.query.get("nextToken");
    let all = snapshots.list({ sandboxId: ctx.query.get("sandboxID") ?? undefined, name: ctx.query.get("name") ?? undefined });
    if (token) all = all.filter(afterCursor(token));
    const page = all.slice(0, limit);
    const headers: Record<string, string> = all.length > limit ? { "x-next-token": cursorOf(page[page.length - 1]!) } : {};
    ctx.sendJson(200, page.map(snapshotInfo), headers);
  });
  // `Template.exists(name)`: 200 with the id for a template of the team, 404 otherwise.
  router.get("/templates/aliases/:alias", (ctx) => {
    deps.auth(ctx);
    const alias = ctx.params.alias!;
    if (!IDENTIFIER.test(alias) || UUID.test(alias)) throw new HttpError(400, `Invalid alias: ${alias}`);
    if (deps.templates.has(alias)) return { templateID: alias, public: true };
    const found = snapshots.find(alias);
    if (!found || found.alias !== alias) throw new HttpError(404, `template '${alias}' not found`);
    return { templateID: found.id, public: false };
  });
  router.delete("/templates/:templateID", async (ctx) => {
    deps.auth(ctx);
    if (!(await snapshots.remove(ctx.params.templateID!))) throw new HttpError(404, `template '${ctx.params.templateID}' not found`);
    ctx.send(204);
  });
}
