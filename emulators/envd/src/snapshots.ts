import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { HttpError, queryInt, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { captureDisk } from "@paperclip-sandbox/sandbox-backend";
import type { SandboxRegistry } from "./sandboxes.js";

/** The one team of the emulator: snapshot names are namespaced by it, as E2B namespaces them by team slug. */
const EMULATOR_TEAM = "emulator-team";
const TAG = "default";

interface SnapshotTemplate {
  /** The template id (`abc123`), what a nameless snapshot is known by. */
  id: string;
  /** The alias given at capture (`my-snapshot`), or none. */
  alias: string | undefined;
  sandboxId: string;
  /** The copy of the sandbox's writable trees. */
  dir: string;
}

/**
 * Snapshot templates (`POST /sandboxes/{id}/snapshots`): a copy of a sandbox's writable trees (the
 * backend's `captureDisk`, taken frozen) kept as a template a sandbox can be created from. Referred to
 * as E2B does: `team/alias:tag`, `team/alias`, `alias`, `alias:tag`, the template id or `id:tag`.
 */
export class SnapshotTemplates {
  private readonly templates = new Map<string, SnapshotTemplate>();

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
    const template = { id, alias, sandboxId, dir };
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

  list(filter: { sandboxId?: string; name?: string }): SnapshotTemplate[] {
    return [...this.templates.values()].filter((t) => (!filter.sandboxId || t.sandboxId === filter.sandboxId) && (!filter.name || t.alias === filter.name || this.find(filter.name) === t));
  }
}

/** `SnapshotInfo` of the generated `components` typings. */
function snapshotInfo(template: SnapshotTemplate): { snapshotID: string; names: string[] } {
  const full = template.alias === undefined ? undefined : `${EMULATOR_TEAM}/${template.alias}:${TAG}`;
  return { snapshotID: full ?? `${template.id}:${TAG}`, names: full ? [full] : [] };
}

/** The routes: create a snapshot of a sandbox, list snapshots, delete one (a snapshot is a template). */
export function snapshotRoutes(router: Router, deps: { registry: SandboxRegistry; snapshots: SnapshotTemplates; auth(ctx: HttpContext): void }): void {
  const { registry, snapshots } = deps;
  router.post("/sandboxes/:id/snapshots", async (ctx) => {
    deps.auth(ctx);
    const body = ((await ctx.readJson<{ name?: unknown }>()) ?? {}) as { name?: unknown };
    if (body.name !== undefined && (typeof body.name !== "string" || !/^[a-z0-9][a-z0-9._-]{0,127}$/.test(body.name))) {
      throw new HttpError(400, "name: lowercase letters, digits, '.', '_' and '-', at most 128");
    }
    const template = await snapshots.capture(registry, ctx.params.id!, body.name as string | undefined);
    if (!template) throw new HttpError(404, `sandbox "${ctx.params.id}" doesn't exist or you don't have access to it`);
    ctx.sendJson(201, snapshotInfo(template));
  });
  router.get("/snapshots", (ctx) => {
    deps.auth(ctx);
    const limit = queryInt(ctx.query, "limit", { min: 1, max: 100 }) ?? 100;
    const all = snapshots.list({ sandboxId: ctx.query.get("sandboxID") ?? undefined, name: ctx.query.get("name") ?? undefined });
    return all.slice(0, limit).map(snapshotInfo);
  });
  router.delete("/templates/:templateID", async (ctx) => {
    deps.auth(ctx);
    if (!(await snapshots.remove(ctx.params.templateID!))) throw new HttpError(404, `template '${ctx.params.templateID}' not found`);
    ctx.send(204);
  });
}
