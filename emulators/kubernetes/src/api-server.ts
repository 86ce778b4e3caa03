// The HTTP side of the emulated API server: discovery, CRUD with label/field selectors, watch,
// PATCH (merge, strategic-as-merge, JSON patch), status sub-resources, pod logs, Table output for
// kubectl. Every error is a metav1.Status.
import type { ServerResponse } from "node:http";
import { HttpError, requireBearer, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import type { Cluster, Propagation } from "./cluster.js";
import { apiVersionOf, groupList, groupOf, resourceList, type ResourceType } from "./resources.js";
import { parseFieldSelector, parseLabelSelector } from "./selectors.js";
import { apiError, badRequest, successStatus } from "./status.js";
import type { KubeObject } from "./validation.js";

export const EMULATED_VERSION = {
  major: "1",
  minor: "33",
  gitVersion: "v1.33.0+paperclip-emulator",
  gitCommit: "emulator",
  gitTreeState: "clean",
  buildDate: "2026-01-01T00:00:00Z",
  goVersion: "go1.24",
  compiler: "gc",
  platform: "linux/amd64",
};

const BODY_LIMIT = 3 * 1024 * 1024;

export interface ApiServerOptions {
  cluster: Cluster;
  token: string;
  /** host:port of the server, for /api's serverAddressByClientCIDRs. */
  address: () => string;
}

export function registerApiRoutes(router: Router, options: ApiServerOptions): void {
  const { cluster } = options;
  const auth = (ctx: HttpContext) => requireBearer(ctx, { accept: [options.token], missingMessage: "Unauthorized", invalidMessage: "Unauthorized", code: "Unauthorized" });
  const types = cluster.types;

  router.get("/version", (ctx) => (auth(ctx), EMULATED_VERSION));
  router.get("/healthz", (ctx) => ctx.send(200, "ok", { "content-type": "text/plain" }));
  router.get("/readyz", (ctx) => ctx.send(200, "ok", { "content-type": "text/plain" }));
  router.get("/api", (ctx) => {
    auth(ctx);
    return { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: options.address() }] };
  });
  router.get("/api/v1", (ctx) => (auth(ctx), resourceList(types, "", "v1")));
  router.get("/apis", (ctx) => (auth(ctx), groupList(types)));
  const groups = new Map<string, string[]>();
  for (const t of types) if (t.group) groups.set(t.group, [...new Set([...(groups.get(t.group) ?? []), ...t.versions])]);
  for (const [group, versions] of groups) {
    router.get(`/apis/${group}`, (ctx) => (auth(ctx), { kind: "APIGroup", apiVersion: "v1", ...groupOf(group, versions) }));
    for (const version of versions) router.get(`/apis/${group}/${version}`, (ctx) => (auth(ctx), resourceList(types, group, version)));
  }

  for (const type of types) {
    for (const version of type.versions) {
      const prefix = type.group ? `/apis/${type.group}/${version}` : `/api/${version}`;
      const collection = type.namespaced ? `${prefix}/namespaces/:namespace/${type.resource}` : `${prefix}/${type.resource}`;
      const item = `${collection}/:name`;
      const ns = (ctx: HttpContext) => (type.namespaced ? ctx.params.namespace : undefined);
      const out = (obj: KubeObject) => ({ ...obj, apiVersion: apiVersionOf(type, version) });

      router.get(collection, (ctx) => (auth(ctx), listOrWatch(ctx, cluster, type, version, ns(ctx))));
      if (type.namespaced) router.get(`${prefix}/${type.resource}`, (ctx) => (auth(ctx), listOrWatch(ctx, cluster, type, version, undefined)));
      router.post(
        collection,
        async (ctx) => {
          auth(ctx);
          const body = await readObject(ctx);
          if (type.namespaced && body.metadata?.namespace && body.metadata.namespace !== ctx.params.namespace) {
            throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
          }
          if (ctx.query.get("dryRun") === "All") {
            return ctx.sendJson(201, out({ ...body, apiVersion: apiVersionOf(type, version), kind: type.kind }));
          }
          ctx.sendJson(201, out(cluster.create(type, ns(ctx), body, version)));
        },
        { bodyLimit: BODY_LIMIT },
      );
      router.get(item, (ctx) => (auth(ctx), out(cluster.store.mustGet(type, ns(ctx), ctx.params.name!))));
      router.put(item, async (ctx) => (auth(ctx), out(cluster.replace(type, ns(ctx), ctx.params.name!, await readObject(ctx), undefined, version))), { bodyLimit: BODY_LIMIT });
      router.patch(item, async (ctx) => (auth(ctx), out(await patch(ctx, cluster, type, ns(ctx), undefined, version))), { bodyLimit: BODY_LIMIT });
      router.delete(item, async (ctx) => {
        auth(ctx);
        const options = ((await ctx.readJson<{ propagationPolicy?: string; orphanDependents?: boolean }>().catch(() => undefined)) ?? {}) as { propagationPolicy?: string; orphanDependents?: boolean };
        const raw = ctx.query.get("propagationPolicy") ?? options.propagationPolicy ?? (options.orphanDependents === true || ctx.query.get("orphanDependents") === "true" ? "Orphan" : undefined);
        if (raw !== undefined && !["Foreground", "Background", "Orphan"].includes(raw)) {
          throw apiError(
            422,
            "Invalid",
            `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: ${JSON.stringify(raw)}: supported values: "Foreground", "Background", "Orphan"`,
          );
        }
        const current = cluster.store.mustGet(type, ns(ctx), ctx.params.name!);
        const remaining = cluster.delete(type, ns(ctx), ctx.params.name!, raw as Propagation | undefined);
        if (remaining) return out(remaining);
        ctx.sendJson(200, successStatus({ name: ctx.params.name, ...(type.group ? { group: type.group } : {}), kind: type.resource, uid: current.metadata?.uid }));
      });
      if (type.subresources?.includes("status")) {
        router.get(`${item}/status`, (ctx) => (auth(ctx), out(cluster.store.mustGet(type, ns(ctx), ctx.params.name!))));
        router.put(`${item}/status`, async (ctx) => (auth(ctx), out(cluster.replace(type, ns(ctx), ctx.params.name!, await readObject(ctx), "status", version))), { bodyLimit: BODY_LIMIT });
        router.patch(`${item}/status`, async (ctx) => (auth(ctx), out(await patch(ctx, cluster, type, ns(ctx), "status", version))), { bodyLimit: BODY_LIMIT });
      }
      if (type.kind === "Pod") {
        router.get(`${item}/log`, async (ctx) => {
          auth(ctx);
          const pod = cluster.store.mustGet(type, ns(ctx), ctx.params.name!);
          const container = ctx.query.get("container");
          const names = (pod.spec?.containers ?? []).map((c: { name: string }) => c.name);
          if (container && !names.includes(container)) throw badRequest(`container ${container} is not valid for pod ${ctx.params.name}`);
          if (!pod.status?.containerStatuses?.[0]?.state?.running && !pod.status?.containerStatuses?.[0]?.state?.terminated) {
            throw badRequest(`container "${names[0]}" in pod "${ctx.params.name}" is waiting to start: ${pod.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? "ContainerCreating"}`);
          }
          let text = await cluster.kubelet.logs(pod);
          const tail = ctx.query.get("tailLines");
          if (tail !== null)
            text = text
              .split("\n")
              .slice(-Number(tail) - 1)
              .join("\n");
          ctx.send(200, text, { "content-type": "text/plain" });
        });
        router.post(`${item}/exec`, () => {
          throw badRequest("Upgrade request required: pod exec is served over WebSocket (v5.channel.k8s.io, v4.channel.k8s.io)");
        });
      }
    }
  }
}

async function readObject(ctx: HttpContext): Promise<KubeObject> {
  const type = ctx.header("content-type") ?? "application/json";
  if (!/json/.test(type))
    throw apiError(
      415,
      "UnsupportedMediaType",
      `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`,
    );
  const body = await ctx.readJson<KubeObject>();
  if (body === undefined || body === null || typeof body !== "object" || Array.isArray(body)) throw badRequest("Object 'Kind' is missing in '" + JSON.stringify(body ?? "") + "'");
  return body;
}

function listKind(type: ResourceType): string {
  return `${type.kind}List`;
}

function isTrue(value: string | null): boolean {
  return value === "true" || value === "1";
}

function listOrWatch(ctx: HttpContext, cluster: Cluster, type: ResourceType, version: string, namespace: string | undefined): unknown {
  const labels = parseLabelSelector(ctx.query.get("labelSelector"));
  const fields = parseFieldSelector(ctx.query.get("fieldSelector"));
  const matches = (obj: KubeObject) => (namespace === undefined || obj.metadata?.namespace === namespace) && labels(obj.metadata?.labels) && fields(obj);
  const apiVersion = apiVersionOf(type, version);
  const itemOf = (obj: KubeObject) => (type.custom ? { ...obj, apiVersion } : (({ apiVersion: _a, kind: _k, ...rest }) => rest)(obj));
  if (isTrue(ctx.query.get("watch"))) return watch(ctx, cluster, type, apiVersion, matches);
  const items = cluster.store
    .list(type, namespace)
    .filter(matches)
    .sort((a, b) => `${a.metadata?.namespace}/${a.metadata?.name}`.localeCompare(`${b.metadata?.namespace}/${b.metadata?.name}`));
  const resourceVersion = String(cluster.store.resourceVersion);
  if (/as=Table/.test(ctx.header("accept") ?? ""))
    return table(
      type,
      items.map((o) => ({ ...o, apiVersion })),
      resourceVersion,
      cluster.now(),
    );
  return { kind: listKind(type), apiVersion, metadata: { resourceVersion }, items: items.map(itemOf) };
}

function watch(ctx: HttpContext, cluster: Cluster, type: ResourceType, apiVersion: string, matches: (obj: KubeObject) => boolean): void {
  const res = ctx.res as ServerResponse;
  const from = ctx.query.get("resourceVersion");
  const timeout = Number(ctx.query.get("timeoutSeconds") ?? "0");
  const start = from && from !== "0" ? Number(from) : undefined;
  const backlog = start !== undefined ? cluster.store.since(start) : undefined;
  if (start !== undefined && backlog === undefined) {
    throw new HttpError(410, `too old resource version: ${start} (${cluster.store.resourceVersion})`, { code: "Expired" });
  }
  res.writeHead(200, { "content-type": "application/json", "cache-control": "no-cache, private" });
  // A watch with nothing to report yet still answers at once (clients wait for the headers).
  res.flushHeaders();
  const send = (eventType: string, object: KubeObject) => {
    if (!res.writableEnded) res.write(`${JSON.stringify({ type: eventType, object: { ...object, apiVersion, kind: type.kind } })}\n`);
  };
  const queued: Array<[string, KubeObject]> = [];
  let live = false;
  const unsubscribe = cluster.store.subscribe((event) => {
    if (event.resourceType !== type || !matches(event.object)) return;
    if (live) send(event.type, event.object);
    else queued.push([event.type, event.object]);
  });
  if (start === undefined) for (const obj of cluster.store.list(type).filter(matches)) send("ADDED", obj);
  else for (const event of backlog!) if (event.resourceType === type && matches(event.object)) send(event.type, event.object);
  for (const [t, o] of queued) send(t, o);
  live = true;
  const end = () => {
    unsubscribe();
    clearTimeout(timer);
    if (!res.writableEnded) res.end();
  };
  const timer = timeout > 0 ? setTimeout(end, timeout * 1000) : undefined;
  ctx.signal.addEventListener("abort", end, { once: true });
  res.once("close", end);
}

function age(created: string | undefined, now: number): string {
  const s = Math.max(0, Math.floor((now - Date.parse(created ?? "")) / 1000));
  if (!Number.isFinite(s)) return "<unknown>";
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** The server-side printing kubectl asks for (`as=Table`). */
function table(type: ResourceType, items: KubeObject[], resourceVersion: string, now: number): Record<string, unknown> {
  const pod = type.kind === "Pod";
  const columns = pod
    ? [
        ["Name", "string"],
        ["Ready", "string"],
        ["Status", "string"],
        ["Restarts", "string"],
        ["Age", "string"],
      ]
    : [
        ["Name", "string"],
        ["Age", "string"],
      ];
  const rows = items.map((obj) => {
    const statuses = obj.status?.containerStatuses ?? [];
    const reason = obj.metadata?.deletionTimestamp ? "Terminating" : (statuses[0]?.state?.waiting?.reason ?? statuses[0]?.state?.terminated?.reason ?? obj.status?.phase ?? "Pending");
    const cells = pod
      ? [
          obj.metadata?.name,
          `${statuses.filter((s: { ready: boolean }) => s.ready).length}/${obj.spec?.containers?.length ?? 0}`,
          reason,
          String(statuses.reduce((n: number, s: { restartCount?: number }) => n + (s.restartCount ?? 0), 0)),
          age(obj.metadata?.creationTimestamp, now),
        ]
      : [obj.metadata?.name, age(obj.metadata?.creationTimestamp, now)];
    return { cells, object: { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: obj.metadata } };
  });
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion },
    columnDefinitions: columns.map(([name, t], i) => ({ name, type: t, format: i === 0 ? "name" : "", description: "", priority: 0 })),
    rows,
  };
}

async function patch(ctx: HttpContext, cluster: Cluster, type: ResourceType, namespace: string | undefined, subresource: "status" | undefined, version: string): Promise<KubeObject> {
  const contentType = (ctx.header("content-type") ?? "").split(";")[0]!.trim();
  const body = await ctx.readJson<unknown>();
  const current = cluster.store.mustGet(type, namespace, ctx.params.name!);
  let next: KubeObject;
  if (contentType === "application/merge-patch+json" || contentType === "application/strategic-merge-patch+json") next = mergePatch(current, body) as KubeObject;
  else if (contentType === "application/json-patch+json") next = jsonPatch(current, body);
  else
    throw apiError(
      415,
      "UnsupportedMediaType",
      `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json`,
    );
  return cluster.replace(type, namespace, ctx.params.name!, { ...next, metadata: { ...next.metadata, resourceVersion: undefined } }, subresource, version);
}

/** RFC 7386 (also used for strategic merge patches: lists are replaced, not merged by key). */
function mergePatch(target: unknown, patchValue: unknown): unknown {
  if (patchValue === null || typeof patchValue !== "object" || Array.isArray(patchValue)) return patchValue;
  const result: Record<string, unknown> = target && typeof target === "object" && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [key, value] of Object.entries(patchValue as Record<string, unknown>)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

function jsonPatch(doc: KubeObject, ops: unknown): KubeObject {
  if (!Array.isArray(ops)) throw badRequest("the server rejected our request due to an error in our request: json patch must be an array");
  let result: any = structuredClone(doc);
  for (const op of ops as Array<{ op: string; path: string; value?: unknown }>) {
    const parts = String(op.path)
      .split("/")
      .slice(1)
      .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
    const last = parts.pop();
    if (last === undefined) throw badRequest(`the server rejected our request due to an error in our request: invalid path ${op.path}`);
    let parent: any = result;
    for (const p of parts) {
      if (parent?.[p] === undefined) throw apiError(422, "Invalid", `the server rejected our request due to an error in our request: doc is missing path: "${op.path}"`);
      parent = parent[p];
    }
    if (op.op === "add" || op.op === "replace") {
      if (Array.isArray(parent)) parent.splice(last === "-" ? parent.length : Number(last), op.op === "replace" ? 1 : 0, op.value);
      else parent[last] = op.value;
    } else if (op.op === "remove") {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else if (op.op === "test") {
      if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw apiError(422, "Invalid", `the server rejected our request due to an error in our request: testing value ${op.path} failed`);
    } else throw badRequest(`the server rejected our request due to an error in our request: unexpected kind: ${op.op}`);
  }
  return result as KubeObject;
}
