/**
 * Coder's path-based app proxy: `/@<owner>/<workspace>[.<agent>]/apps/<slug>/<rest>` reaches the
 * app's URL inside the workspace, authenticated by the session token (cookie, query or header),
 * which is stripped (with Coder's other cookies) before the request goes on. HTTP requests and
 * WebSocket upgrades are forwarded, bodies streamed both ways.
 */
import http from "node:http";
import { HttpError, type HttpContext, type Router, type WebSocketContext } from "@paperclip-sandbox/emulator-kit";
import WebSocket from "ws";
import { forwardedHeaders, requireSession, SESSION_COOKIE } from "./auth.js";
import type { Deployment } from "./deployment.js";
import { buildStatus, latestBuild, type AppRecord } from "./model.js";
import { appTarget, type AppTarget, type WorkspaceAgentPool } from "./workspace-net.js";

const APP_ROUTE = "/:owner/:workspace/apps/:slug/*rest";

export interface AppProxyDeps {
  deployment: Deployment;
  sessionToken: string;
}

interface Resolved {
  target: AppTarget;
  pool: WorkspaceAgentPool;
  sandbox: import("@paperclip-sandbox/sandbox-backend").Sandbox;
  /** The path and query the app receives. */
  forwardPath: string;
}

/** What Coder renders (as an HTML page) when the app cannot be reached. */
function proxyError(status: number, title: string, detail: string): HttpError {
  return new HttpError(status, title, { details: { detail } });
}

function resolve(deps: AppProxyDeps, params: Readonly<Record<string, string>>, rawUrl: string): Resolved {
  const owner = params.owner ?? "";
  if (!owner.startsWith("@") || (owner.slice(1) !== deps.deployment.user.username && owner.slice(1) !== "me")) {
    throw proxyError(404, "Workspace not found", `No workspace owner ${JSON.stringify(owner.slice(1))} is visible to you.`);
  }
  const [workspaceName, agentName] = (params.workspace ?? "").split(".", 2);
  let workspace;
  try {
    workspace = deps.deployment.workspaceByName(workspaceName!, false);
  } catch {
    throw proxyError(404, "Workspace not found", `Workspace ${JSON.stringify(workspaceName)} does not exist.`);
  }
  const build = latestBuild(workspace);
  const agent = build.agent;
  if (!agent || buildStatus(build) !== "running") throw proxyError(502, "Workspace is not running", `The workspace is ${buildStatus(build)}.`);
  if (agentName !== undefined && agentName !== agent.name) throw proxyError(404, "Agent not found", `The workspace has no agent ${JSON.stringify(agentName)}.`);
  const live = deps.deployment.live(workspace);
  if (!live || agent.status !== "connected") throw proxyError(502, "Agent not connected", `The agent is ${agent.status}.`);
  const slug = params.slug ?? "";
  let app: AppRecord | undefined;
  let target: AppTarget | undefined;
  if (/^\d+$/.test(slug)) {
    const port = Number(slug);
    if (port < 9 || port > 65_535) throw proxyError(400, "Invalid port", `Port ${port} is reserved or out of range.`);
    target = { port, path: "/" };
  } else {
    app = agent.apps.find((each) => each.spec.slug === slug);
    if (!app) throw proxyError(404, "Application not found", `The agent has no app ${JSON.stringify(slug)}.`);
    if (app.spec.subdomain) throw proxyError(400, "Application requires subdomain", `App ${JSON.stringify(slug)} is configured for subdomain access only.`);
    target = appTarget(app.spec.url);
    if (!target) throw proxyError(502, "Bad application URL", `App ${JSON.stringify(slug)} has URL ${app.spec.url}, which the emulator cannot reach.`);
  }
  // Everything after /apps/<slug>/ as sent (not decoded), the session token dropped from the query.
  const url = new URL(rawUrl, "http://emulator");
  const rest = url.pathname.split("/").slice(5).join("/");
  url.searchParams.delete(SESSION_COOKIE);
  const base = target.path.endsWith("/") ? target.path : `${target.path}/`;
  const query = url.searchParams.toString();
  return { target, pool: live.pool, sandbox: live.sandbox, forwardPath: `${base}${rest}${query ? `?${query}` : ""}` };
}

export function registerAppProxy(router: Router, deps: AppProxyDeps): void {
  // Without the trailing slash Coder redirects, so relative links inside the app work.
  router.route("*", "/:owner/:workspace/apps/:slug", (ctx) => {
    if (!ctx.params.owner?.startsWith("@")) throw new HttpError(404, "Not found");
    const url = new URL(ctx.req.url ?? "/", "http://emulator");
    ctx.send(307, "", { location: `${url.pathname}/${url.search}` });
  });

  router.route("*", APP_ROUTE, async (ctx: HttpContext) => {
    requireSession(ctx.headers, ctx.query, deps.sessionToken);
    const resolved = resolve(deps, ctx.params, ctx.req.url ?? "/");
    await forwardHttp(ctx, resolved);
  });

  router.ws(APP_ROUTE, {
    before(ctx) {
      requireSession(ctx.headers, ctx.query, deps.sessionToken);
      resolve(deps, ctx.params, ctx.req.url ?? "/");
    },
    onConnection(socket, ctx) {
      forwardWebSocket(socket, ctx, resolve(deps, ctx.params, ctx.req.url ?? "/"));
    },
  });
}

function forwardHttp(ctx: HttpContext, resolved: Resolved): Promise<void> {
  return new Promise<void>((done) => {
    const upstream = http.request(
      {
        host: "localhost",
        port: resolved.target.port,
        path: resolved.forwardPath,
        method: ctx.method,
        headers: { ...forwardedHeaders(ctx.headers), host: `localhost:${resolved.target.port}` },
        agent: resolved.pool,
      },
      (response) => {
        const headers: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(response.headers)) {
          if (value !== undefined && !["connection", "keep-alive", "transfer-encoding"].includes(name)) headers[name] = value;
        }
        ctx.res.writeHead(response.statusCode ?? 502, headers);
        response.on("data", (chunk: Buffer) => {
          if (!(ctx.res as unknown as NodeJS.WritableStream).write(chunk)) {
            response.pause();
            ctx.res.once("drain", () => response.resume());
          }
        });
        response.on("end", () => {
          ctx.res.end();
          done();
        });
        response.on("error", () => {
          ctx.cut();
          done();
        });
      },
    );
    upstream.on("error", (error) => {
      if (!ctx.res.headersSent) ctx.sendError(502, "Failed to proxy request to application", { details: { detail: error.message } });
      else ctx.cut();
      done();
    });
    // The caller left: the request to the app goes too.
    ctx.signal.addEventListener("abort", () => upstream.destroy(), { once: true });
    const body = ctx.body();
    body.pipe(upstream);
  });
}

function forwardWebSocket(client: WebSocket, ctx: WebSocketContext, resolved: Resolved): void {
  const headers = forwardedHeaders(ctx.headers);
  for (const name of ["upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"]) delete headers[name];
  const protocols = String(ctx.headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  const upstream = new WebSocket(`ws://localhost:${resolved.target.port}${resolved.forwardPath}`, protocols, {
    headers: headers as Record<string, string>,
    perMessageDeflate: false,
    maxPayload: 64 * 1024 * 1024,
    createConnection: () => resolved.pool.takeTunnel(resolved.target.port) as never,
  });
  const pending: Array<{ data: WebSocket.RawData; binary: boolean }> = [];
  client.on("message", (data, binary) => {
    if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary });
    else pending.push({ data, binary });
  });
  upstream.on("open", () => {
    for (const message of pending.splice(0)) upstream.send(message.data, { binary: message.binary });
  });
  upstream.on("message", (data, binary) => {
    if (client.readyState === WebSocket.OPEN) client.send(data, { binary });
  });
  const closeCode = (code: number) => (code === 1005 || code === 1006 || code < 1000 || code >= 5000 ? 1011 : code);
  upstream.on("close", (code, reason) => {
    if (client.readyState === WebSocket.OPEN) client.close(closeCode(code), reason);
    else client.terminate();
  });
  upstream.on("error", () => {
    if (client.readyState === WebSocket.OPEN) client.close(1011, "Failed to proxy to the application");
  });
  client.on("close", (code, reason) => {
    if (upstream.readyState === WebSocket.OPEN) upstream.close(closeCode(code) === 1011 ? 1000 : code, reason);
    else upstream.terminate();
  });
}
