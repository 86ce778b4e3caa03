// The Coder emulator through plain HTTP and WebSocket clients, as a Coder client sees it.
import { randomUUID } from "node:crypto";
import { createManualClock, runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { echoAppTemplate } from "./__fixtures__/echo-app.js";
import type { DeploymentControl } from "./deployment.js";
import { emulator } from "./index.js";

let emu: RunningEmulator;
let control: DeploymentControl;
let token: string;

beforeAll(async () => {
  emu = await runEmulator(emulator, {
    options: {
      templates: [
        echoAppTemplate("echo", {
          parameters: [
            {
              name: "region",
              options: [
                { name: "EU", value: "eu" },
                { name: "US", value: "us" },
              ],
              defaultValue: "eu",
              mutable: true,
            },
            { name: "disk", type: "number", defaultValue: "10", mutable: false },
            { name: "greeting", ephemeral: true, mutable: true, defaultValue: "hi" },
          ],
        }),
        { name: "needs-input", parameters: [{ name: "repo", required: true, mutable: true }], agent: { name: "main" } },
        { name: "broken-start", agent: { name: "main", startupScript: "echo nope >&2; exit 3" } },
        healthcheckAt("health-404", "/status/404"),
        healthcheckAt("health-503", "/status/503"),
        healthcheckMatrix("health-matrix"),
      ],
      expose: (c) => (control = c),
    },
  });
  token = emu.credentials.sessionToken!;
});
afterAll(async () => {
  await emu?.close();
});

/** The echo app with its healthcheck on `path` (threshold 3). */
function healthcheckAt(name: string, path: string) {
  const echo = echoAppTemplate(name);
  const app = echo.agent!.apps![0]!;
  return { ...echo, agent: { ...echo.agent, apps: [{ ...app, healthcheck: { url: `http://localhost:4200${path}`, interval: 1, threshold: 3 } }] } };
}

/**
 * One workspace, many checked apps (threshold 1 unless said): redirects followed as Go's client does,
 * and checks the agent never runs (threshold 0, interval 0) on a URL that answers 200.
 */
const MATRIX: Record<string, { path: string; final: string; interval?: number; threshold?: number }> = {
  "to-500": { path: "/redirect/302?to=/status/500", final: "unhealthy" },
  "to-200": { path: `/redirect/307?to=${encodeURIComponent("http://localhost:4200/status/200")}`, final: "healthy" },
  "no-location": { path: "/status/302", final: "healthy" },
  "nine-hops": { path: "/hops/9", final: "healthy" },
  "ten-hops": { path: "/hops/10", final: "unhealthy" },
  "off-workspace": { path: `/redirect/302?to=${encodeURIComponent("http://example.invalid/")}`, final: "unhealthy" },
  "threshold-0": { path: "/healthz", final: "initializing", threshold: 0 },
  "interval-0": { path: "/healthz", final: "initializing", interval: 0, threshold: 3 },
};
function healthcheckMatrix(name: string) {
  const echo = echoAppTemplate(name);
  const app = echo.agent!.apps![0]!;
  const apps = Object.entries(MATRIX).map(([slug, c]) => ({ ...app, slug, healthcheck: { url: `http://localhost:4200${c.path}`, interval: c.interval ?? 1, threshold: c.threshold ?? 1 } }));
  return { ...echo, agent: { ...echo.agent, apps } };
}

const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = { "coder-session-token": token }) => {
  const response = await fetch(`${emu.url}${path}`, {
    method,
    headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    redirect: "manual",
  });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: response.status, json, headers: response.headers };
};

async function until<T>(read: () => Promise<T>, check: (value: T) => boolean, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value).slice(0, 600)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function template(name: string) {
  const me = (await api("GET", "/api/v2/users/me")).json;
  const org = (await api("GET", `/api/v2/users/me/organizations`)).json[0];
  const tpl = (await api("GET", `/api/v2/organizations/${org.id}/templates/${name}`)).json;
  return { me, org, tpl };
}

async function createReady(templateName = "echo", extra: Record<string, unknown> = {}) {
  const { tpl } = await template(templateName);
  const created = await api("POST", "/api/v2/users/me/workspaces", { name: `ws-${randomUUID().slice(0, 8)}`, template_id: tpl.id, ...extra });
  expect(created.status).toBe(201);
  const ws = await until(
    () => api("GET", `/api/v2/workspaces/${created.json.id}`).then((r) => r.json),
    (w) =>
      w.latest_build.status === "running" &&
      w.latest_build.resources[0]?.agents[0]?.lifecycle_state === "ready" &&
      w.latest_build.resources[0].agents[0].apps.every((a: any) => a.health === "healthy"),
    "the workspace to be ready",
  );
  return ws;
}

async function build(id: string, body: Record<string, unknown>) {
  const posted = await api("POST", `/api/v2/workspaces/${id}/builds`, body);
  expect(posted.status).toBe(201);
  return until(
    () => api("GET", `/api/v2/workspacebuilds/${posted.json.id}`).then((r) => r.json),
    (b) => !["pending", "running"].includes(b.job.status),
    `the ${body.transition} build`,
  );
}

describe("authentication", () => {
  it("serves buildinfo without a token and refuses the API without one, in Coder's words", async () => {
    expect((await api("GET", "/api/v2/buildinfo", undefined, {})).json.version).toMatch(/^v2\./);
    const missing = await api("GET", "/api/v2/users/me", undefined, {});
    expect(missing.status).toBe(401);
    expect(missing.json).toEqual({
      message: "You are signed out or your session has expired. Please sign in again to continue.",
      detail: 'Cookie "coder_session_token" or query parameter must be provided.',
    });
    expect((await api("GET", "/api/v2/users/me", undefined, { "coder-session-token": "short" })).json.detail).toMatch(/incorrect amount of API key parts/);
    const wrong = `${token.slice(0, 11)}${"x".repeat(22)}`;
    expect((await api("GET", "/api/v2/users/me", undefined, { "coder-session-token": wrong })).json.detail).toBe("API key secret is invalid.");
  });

  it("takes the token from the header, the cookie, the query parameter or a Bearer header", async () => {
    for (const headers of [{ "coder-session-token": token }, { cookie: `coder_session_token=${token}` }, { authorization: `Bearer ${token}` }] as Record<string, string>[]) {
      expect((await api("GET", "/api/v2/users/me", undefined, headers)).json.username).toBe("paperclip");
    }
    expect((await api("GET", `/api/v2/users/me?coder_session_token=${token}`, undefined, {})).status).toBe(200);
  });
});

describe("templates and workspaces", () => {
  it("lists rich parameters of the active version", async () => {
    const { tpl } = await template("echo");
    const params = (await api("GET", `/api/v2/templateversions/${tpl.active_version_id}/rich-parameters`)).json;
    expect(params.map((p: any) => [p.name, p.type, p.mutable, p.ephemeral, p.default_value])).toEqual([
      ["region", "string", true, false, "eu"],
      ["disk", "number", false, false, "10"],
      ["greeting", "string", true, true, "hi"],
    ]);
    expect((await api("GET", "/api/v2/organizations/coder/templates/nosuch")).status).toBe(404);
  });

  it("creates a workspace whose start build runs as a job, with its agent ready and its app healthy", async () => {
    const { tpl } = await template("echo");
    const created = await api("POST", "/api/v2/users/me/workspaces", { name: "first-ws", template_id: tpl.id, ttl_ms: 3_600_000, rich_parameter_values: [{ name: "region", value: "us" }] });
    expect(created.status).toBe(201);
    expect(created.json.latest_build).toMatchObject({ transition: "start", build_number: 1, status: "pending", job: { status: "pending" } });
    const ws = await createReadyFrom(created.json.id);
    const agent = ws.latest_build.resources[0].agents[0];
    expect(agent).toMatchObject({ status: "connected", lifecycle_state: "ready", directory: "/home/coder", operating_system: "linux" });
    expect(agent.apps[0]).toMatchObject({ slug: "echo", subdomain: false, sharing_level: "owner", health: "healthy" });
    expect(ws.latest_build.deadline).toBeDefined();
    expect((await api("GET", `/api/v2/workspacebuilds/${ws.latest_build.id}/parameters`)).json).toEqual([
      { name: "region", value: "us" },
      { name: "disk", value: "10" },
      { name: "greeting", value: "hi" },
    ]);
    expect((await api("GET", `/api/v2/workspaceagents/${agent.id}`)).json.lifecycle_state).toBe("ready");
    expect((await api("GET", "/api/v2/users/me/workspace/first-ws")).json.id).toBe(ws.id);
    const listed = (await api("GET", `/api/v2/workspaces?q=${encodeURIComponent('owner:me name:"first"')}`)).json;
    expect(listed.workspaces.map((w: any) => w.id)).toEqual([ws.id]);
    expect(listed.count).toBe(1);
    const conflict = await api("POST", "/api/v2/users/me/workspaces", { name: "first-ws", template_id: tpl.id });
    expect(conflict.status).toBe(409);
  });

  async function createReadyFrom(id: string) {
    return until(
      () => api("GET", `/api/v2/workspaces/${id}`).then((r) => r.json),
      (w) =>
        w.latest_build.status === "running" &&
        w.latest_build.resources[0]?.agents[0]?.lifecycle_state === "ready" &&
        w.latest_build.resources[0].agents[0].apps.every((a: any) => a.health === "healthy"),
      "the workspace to be ready",
    );
  }

  it("refuses bad names and parameters with Coder's messages", async () => {
    const { tpl } = await template("echo");
    const badName = await api("POST", "/api/v2/users/me/workspaces", { name: "no_underscores", template_id: tpl.id });
    expect(badName.status).toBe(400);
    expect(badName.json.validations[0].field).toBe("name");
    const badOption = await api("POST", "/api/v2/users/me/workspaces", { name: "bad-option", template_id: tpl.id, rich_parameter_values: [{ name: "region", value: "mars" }] });
    expect(badOption.json).toEqual({ message: 'Unable to validate parameter "region"', detail: "parameter value must match one of options: eu, us" });
    const needs = await template("needs-input");
    const missing = await api("POST", "/api/v2/users/me/workspaces", { name: "missing-param", template_id: needs.tpl.id });
    expect(missing.json.detail).toBe('Parameter "repo" is required but not provided');
    const unknown = await api("POST", "/api/v2/users/me/workspaces", { name: "unknown-param", template_id: tpl.id, rich_parameter_values: [{ name: "nope", value: "x" }] });
    expect(unknown.status).toBe(400);
  });

  it("stops and starts a workspace with its disk kept; immutable parameters stay; one build at a time", async () => {
    const ws = await createReady();
    const sandbox = control.sandbox(ws.id)!;
    const write = await sandbox.exec({ script: "echo kept > /home/coder/file" });
    await write.exited;
    const stop = await api("POST", `/api/v2/workspaces/${ws.id}/builds`, { transition: "stop" });
    expect(stop.status).toBe(201);
    expect((await api("POST", `/api/v2/workspaces/${ws.id}/builds`, { transition: "start" })).json).toEqual({ message: "A workspace build is already active." });
    const stopped = await until(
      () => api("GET", `/api/v2/workspacebuilds/${stop.json.id}`).then((r) => r.json),
      (b) => b.status === "stopped",
      "stopped",
    );
    expect(stopped.resources).toEqual([]);
    const immutable = await api("POST", `/api/v2/workspaces/${ws.id}/builds`, { transition: "start", rich_parameter_values: [{ name: "disk", value: "20" }] });
    expect(immutable.json.detail).toBe('Parameter "disk" is not mutable, so it can\'t be updated after creating a workspace.');
    const started = await build(ws.id, { transition: "start", rich_parameter_values: [{ name: "region", value: "us" }] });
    expect(started.status).toBe("running");
    expect((await api("GET", `/api/v2/workspacebuilds/${started.id}/parameters`)).json).toContainEqual({ name: "region", value: "us" });
    const read = await control.sandbox(ws.id)!.exec({ script: "cat /home/coder/file" });
    await read.exited;
    expect((await read.read("stdout")).data.toString()).toBe("kept\n");
  });

  it("deletes a workspace: 410 afterwards unless deleted ones are asked for, and the jail is gone", async () => {
    const ws = await createReady();
    const deleted = await build(ws.id, { transition: "delete" });
    expect(deleted.status).toBe("deleted");
    const gone = await api("GET", `/api/v2/workspaces/${ws.id}`);
    expect(gone.status).toBe(410);
    expect(gone.json.message).toMatch(/was deleted/);
    expect((await api("GET", `/api/v2/workspaces/${ws.id}?include_deleted=true`)).json.latest_build.status).toBe("deleted");
    expect((await api("GET", `/api/v2/workspaces/${ws.id}?include_deleted=maybe`)).status).toBe(400);
    expect((await api("POST", `/api/v2/workspaces/${ws.id}/builds`, { transition: "delete" })).status).toBe(410);
    expect(control.sandbox(ws.id)).toBeUndefined();
    expect(control.workspaces().find((w) => w.id === ws.id)?.deleted).toBe(true);
  });

  it("runs app healthchecks as Coder's agent does: healthy on any answer below 500, unhealthy past the threshold from initializing too", async () => {
    const appHealth = async (templateName: string, wanted: string) => {
      const { tpl } = await template(templateName);
      const created = await api("POST", "/api/v2/users/me/workspaces", { name: `ws-${randomUUID().slice(0, 8)}`, template_id: tpl.id });
      expect(created.status).toBe(201);
      const seen = new Set<string>();
      await until(
        () => api("GET", `/api/v2/workspaces/${created.json.id}`).then((r) => r.json.latest_build.resources[0]?.agents[0]?.apps[0]?.health as string | undefined),
        (health) => {
          if (health) seen.add(health);
          return health === wanted;
        },
        `app health ${wanted}`,
      );
      await build(created.json.id, { transition: "delete" });
      return seen;
    };
    expect(await appHealth("health-404", "healthy")).not.toContain("unhealthy");
    // Its app never answers below 500: it was initializing, and is unhealthy without ever having been healthy.
    const failing = await appHealth("health-503", "unhealthy");
    expect(failing).toContain("initializing");
    expect(failing).not.toContain("healthy");
  });

  it("follows a healthcheck's redirects as Go's client does, and never checks an app whose threshold or interval is 0", async () => {
    const { tpl } = await template("health-matrix");
    const created = await api("POST", "/api/v2/users/me/workspaces", { name: `ws-${randomUUID().slice(0, 8)}`, template_id: tpl.id });
    expect(created.status).toBe(201);
    const seen = new Map<string, Set<string>>(Object.keys(MATRIX).map((slug) => [slug, new Set()]));
    const checked = Object.keys(MATRIX).filter((slug) => MATRIX[slug]!.final !== "initializing");
    // Until every app the agent checks has settled; the unhealthy ones need two failed rounds (threshold 1),
    // so an unchecked app would have been checked (and changed) by then.
    const apps = await until(
      () => api("GET", `/api/v2/workspaces/${created.json.id}`).then((r) => (r.json.latest_build.resources[0]?.agents[0]?.apps ?? []) as Array<{ slug: string; health: string }>),
      (list) => {
        for (const a of list) seen.get(a.slug)?.add(a.health);
        return list.length > 0 && checked.every((slug) => list.find((a) => a.slug === slug)?.health === MATRIX[slug]!.final);
      },
      "every checked app to settle",
    );
    expect(Object.fromEntries(apps.map((a) => [a.slug, a.health]))).toEqual(Object.fromEntries(Object.entries(MATRIX).map(([slug, c]) => [slug, c.final])));
    // A redirect to a 500 (or one too many) is a failure from the first check: never healthy on the way.
    for (const slug of ["to-500", "ten-hops", "off-workspace"]) expect(seen.get(slug)).not.toContain("healthy");
    for (const slug of ["threshold-0", "interval-0"]) expect([...seen.get(slug)!]).toEqual(["initializing"]);
    await build(created.json.id, { transition: "delete" });
  });

  it("reports a failed provisioner job and a startup script that fails", async () => {
    control.failNext("start", "terraform apply: quota exceeded");
    const { tpl } = await template("echo");
    const created = await api("POST", "/api/v2/users/me/workspaces", { name: "fails", template_id: tpl.id });
    const failed = await until(
      () => api("GET", `/api/v2/workspacebuilds/${created.json.latest_build.id}`).then((r) => r.json),
      (b) => b.job.status === "failed",
      "failed",
    );
    expect(failed).toMatchObject({ status: "failed", job: { error: "terraform apply: quota exceeded" } });
    expect((await build(created.json.id, { transition: "delete" })).status).toBe("deleted");

    const broken = await template("broken-start");
    const ws = await api("POST", "/api/v2/users/me/workspaces", { name: "broken", template_id: broken.tpl.id });
    const agent = await until(
      () => api("GET", `/api/v2/workspaces/${ws.json.id}`).then((r) => r.json.latest_build.resources[0]?.agents[0]),
      (a) => a?.lifecycle_state === "start_error",
      "start_error",
    );
    expect(agent.status).toBe("connected");
    await build(ws.json.id, { transition: "delete" });
  });
});

describe("app proxy", () => {
  it("forwards to the app inside the workspace with Coder's cookies and token stripped", async () => {
    const ws = await createReady();
    const base = `${emu.url}/@paperclip/${ws.name}.main/apps/echo`;
    const response = await fetch(`${base}/some/path?x=1&coder_session_token=${token}`, {
      method: "POST",
      headers: { cookie: `coder_session_token=${token}; theme=dark`, "coder-session-token": token },
      body: "12345",
    });
    expect(response.status).toBe(200);
    const seen = (await response.json()) as any;
    expect(seen).toMatchObject({ method: "POST", url: "/some/path?x=1", bytes: 5, user: "coder", home: "/home/coder" });
    expect(seen.headers.cookie).toBe("theme=dark");
    expect(seen.headers["coder-session-token"]).toBeUndefined();
    expect(JSON.stringify(seen)).not.toContain(token);
    const bare = await fetch(base, { headers: { "coder-session-token": token }, redirect: "manual" });
    expect(bare.status).toBe(307);
    expect(bare.headers.get("location")).toBe(`/@paperclip/${ws.name}.main/apps/echo/`);
    expect((await fetch(`${base}/`)).status).toBe(401);
    expect((await fetch(`${emu.url}/@paperclip/${ws.name}/apps/nosuch/`, { headers: { "coder-session-token": token } })).status).toBe(404);
  });

  it("carries a WebSocket to the app and refuses a stopped workspace", async () => {
    const ws = await createReady();
    const socket = new WebSocket(`${emu.url.replace("http", "ws")}/@paperclip/${ws.name}/apps/echo/ws`, { headers: { cookie: `coder_session_token=${token}` } });
    const reply = await new Promise<string>((resolve, reject) => {
      socket.on("open", () => socket.send("hello"));
      socket.on("message", (data) => resolve(data.toString()));
      socket.on("error", reject);
    });
    expect(reply).toBe("echo:hello");
    socket.close();
    await build(ws.id, { transition: "stop" });
    const stopped = await fetch(`${emu.url}/@paperclip/${ws.name}/apps/echo/`, { headers: { "coder-session-token": token } });
    expect(stopped.status).toBe(502);
  });
});

describe("reconnecting PTY", () => {
  const pty = (agentId: string, reconnect: string, command: string) =>
    new WebSocket(`${emu.url.replace("http", "ws")}/api/v2/workspaceagents/${agentId}/pty?reconnect=${reconnect}&width=80&height=24&command=${encodeURIComponent(command)}`, {
      headers: { cookie: `coder_session_token=${token}` },
    });
  const collect = (socket: WebSocket) =>
    new Promise<{ output: string; code: number }>((resolve, reject) => {
      let output = "";
      socket.on("message", (data: Buffer) => (output += data.toString()));
      socket.on("close", (code) => resolve({ output, code }));
      socket.on("error", reject);
    });

  it("runs a command in a terminal: stdout and stderr merged with CRLF, closed at its end", async () => {
    const ws = await createReady();
    const agent = ws.latest_build.resources[0].agents[0];
    const { output, code } = await collect(pty(agent.id, randomUUID(), "echo out; echo err >&2; tty; whoami; pwd"));
    expect(code).toBe(1000);
    expect(output).toBe("out\r\nerr\r\n/dev/pts/0\r\ncoder\r\n/home/coder\r\n");
  });

  it("types JSON {data} input into the terminal, which echoes it, and replays the output on reconnect", async () => {
    const ws = await createReady();
    const agent = ws.latest_build.resources[0].agents[0];
    const id = randomUUID();
    const first = pty(agent.id, id, "read line; echo got:$line; sleep 30");
    let seen = "";
    await new Promise<void>((resolve) => {
      first.on("open", () => first.send(JSON.stringify({ data: "abc\r" })));
      first.on("message", (data: Buffer) => {
        seen += data.toString();
        if (seen.includes("got:abc")) resolve();
      });
    });
    expect(seen).toContain("abc\r\n"); // the echo
    first.close();
    const second = pty(agent.id, id, "ignored: the session exists");
    const replay = await new Promise<string>((resolve) => {
      let text = "";
      second.on("message", (data: Buffer) => {
        text += data.toString();
        if (text.includes("got:abc")) resolve(text);
      });
    });
    expect(replay).toContain("got:abc");
    second.send(JSON.stringify({ data: "\u0003" })); // ^C ends the foreground job
    const after = await collect(second);
    expect(after.code).toBe(1000);
  });

  it("opens the terminal at the width and height asked, and resizes it on a {height, width} frame, not on one with a 0", async () => {
    const ws = await createReady();
    const agent = ws.latest_build.resources[0].agents[0];
    const command = `trap 'echo "winch $(stty size)"; exit 0' WINCH; echo "size $(stty size)"; while :; do sleep 0.1; done`;
    const socket = pty(agent.id, randomUUID(), command);
    const done = collect(socket);
    let seen = "";
    await new Promise<void>((resolve) =>
      socket.on("message", (data: Buffer) => {
        seen += data.toString();
        if (seen.includes("size 24 80")) resolve();
      }),
    );
    // A frame with one dimension 0 is input only (the agent resizes when both are above 0).
    socket.send(JSON.stringify({ height: 0, width: 100 }));
    socket.send(JSON.stringify({ height: 40, width: 132 }));
    const { output, code } = await done;
    expect(code).toBe(1000);
    expect(output).toContain("winch 40 132");
    expect(output).not.toContain("winch 24 100");
  });

  it("refuses an agent that is not connected (428) and a bad reconnect id (400)", async () => {
    const ws = await createReady();
    const agent = ws.latest_build.resources[0].agents[0];
    const refusal = (socket: WebSocket) => new Promise<number>((resolve) => socket.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0)));
    expect(await refusal(pty(agent.id, "nope", "true"))).toBe(400);
    await build(ws.id, { transition: "stop" });
    expect(await refusal(pty(agent.id, randomUUID(), "true"))).toBe(428);
  });
});

describe("vendor clock and unserved calls", () => {
  it("runs build and agent durations on the vendor clock; a path coderd has no route for is Coder's 404, recorded as unserved", async () => {
    const clock = createManualClock({ start: Date.now() });
    const timed = await runEmulator(emulator, { options: { clock, jobQueueMs: 60_000, agentConnectMs: 5_000 } });
    try {
      const headers = { "coder-session-token": timed.credentials.sessionToken!, "content-type": "application/json" };
      const get = (path: string) => fetch(`${timed.url}${path}`, { headers }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
      const org = (await get("/api/v2/users/me/organizations")).json[0];
      const tpl = (await get(`/api/v2/organizations/${org.id}/templates/paperclip`)).json;
      const created = await fetch(`${timed.url}/api/v2/users/me/workspaces`, { method: "POST", headers, body: JSON.stringify({ name: "clocked", template_id: tpl.id, ttl_ms: 3_600_000 }) }).then(
        (r) => r.json() as Promise<any>,
      );
      expect(created.latest_build.job.status).toBe("pending");
      await clock.advance(59_000);
      expect((await get(`/api/v2/workspaces/${created.id}`)).json.latest_build.job.status).toBe("pending");
      await clock.advance(1_000);
      const started = await until(
        () => get(`/api/v2/workspaces/${created.id}`).then((r) => r.json),
        (w) => w.latest_build.status === "running",
        "the start build",
      );
      expect(started.latest_build.resources[0].agents[0].status).toBe("connecting");
      expect(Date.parse(started.latest_build.deadline) - clock.now()).toBeGreaterThan(3_500_000);
      await clock.advance(5_000);
      await until(
        () => get(`/api/v2/workspaces/${created.id}`).then((r) => r.json),
        (w) => w.latest_build.resources[0].agents[0].lifecycle_state === "ready",
        "the agent",
      );

      const missing = await get("/api/v2/workspaces/nope/watch-ws");
      expect(missing).toEqual({ status: 404, json: { message: "Route not found." } });
      await timed.requests.idle(5_000);
      expect(timed.requests.unserved()).toEqual([expect.objectContaining({ method: "GET", reason: "no route" })]);

      await fetch(`${timed.url}/api/v2/workspaces/${created.id}/builds`, { method: "POST", headers, body: JSON.stringify({ transition: "delete" }) });
      await clock.advance(60_000);
      await until(
        () => timed.leftovers(),
        (left) => left.length === 0,
        "the workspace's jail to go",
      );
    } finally {
      await timed.close();
    }
  });
});

describe("leftovers", () => {
  it("nothing is left once every workspace is deleted", async () => {
    for (const ws of control.workspaces().filter((w) => !w.deleted)) {
      await until(
        () => api("GET", `/api/v2/workspaces/${ws.id}`).then((r) => r.json),
        (w) => !["pending", "starting", "stopping", "deleting"].includes(w.latest_build.status),
        "idle",
      );
      await build(ws.id, { transition: "delete" });
    }
    expect(await emu.leftovers()).toEqual([]);
  });
});
