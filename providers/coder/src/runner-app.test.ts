// The runner app (runner/src, built into dist/runner) inside a workspace of the Coder emulator,
// reached through the app proxy as the plugin reaches it: the seed's POST /run and the stream route.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { frame, MSG_EXIT, MSG_SIGNAL, MSG_START, MSG_STARTED, MSG_STDERR, MSG_STDIN, MSG_STDIN_END, MSG_STDOUT, MSG_ERROR } from "./runner-protocol.js";
import { startCoderEmulator, type CoderWorld } from "./__fixtures__/emulator.js";

let world: CoderWorld;
let app: string;
let workspaceId: string;
type WorkspaceShape = { latest_build: { resources: { agents: { apps: { health: string }[] }[] }[] } };
const ENV = { PATH: "/usr/bin:/bin", HOME: "/home/coder", ONLY_THIS: "yes" };

beforeAll(async () => {
  world = await startCoderEmulator();
  const headers = { "coder-session-token": world.token, "content-type": "application/json" };
  const template = (await (await fetch(`${world.emu.url}/api/v2/organizations/coder/templates/paperclip`, { headers })).json()) as { id: string };
  const created = (await (await fetch(`${world.emu.url}/api/v2/users/me/workspaces`, { method: "POST", headers, body: JSON.stringify({ name: "runner-test", template_id: template.id }) })).json()) as {
    id: string;
  };
  workspaceId = created.id;
  for (;;) {
    const ws = (await (await fetch(`${world.emu.url}/api/v2/workspaces/${workspaceId}`, { headers })).json()) as WorkspaceShape;
    const agent = ws.latest_build.resources[0]?.agents[0];
    if (agent?.apps[0]?.health === "healthy") break;
    await new Promise((r) => setTimeout(r, 50));
  }
  app = `${world.emu.url}/@paperclip/runner-test.main/apps/paperclip-runner`;
}, 60_000);
afterAll(() => world?.emu.close(), 60_000);

const cookie = () => ({ cookie: `coder_session_token=${world.token}` });
const run = async (body: Record<string, unknown>, signal?: AbortSignal) => {
  const response = await fetch(`${app}/run`, { method: "POST", headers: { ...cookie(), "content-type": "application/json" }, body: JSON.stringify(body), signal });
  return { status: response.status, json: (await response.json()) as any };
};
const alive = async (pattern: string) => (await run({ script: `pgrep -f '${pattern}' >/dev/null && echo alive || echo gone`, env: ENV, envMode: "replace" })).json.stdout.trim();

describe("GET /healthz", () => {
  it("names the protocol, the stream route and the encodings", async () => {
    const response = await fetch(`${app}/healthz`, { headers: cookie() });
    expect(await response.json()).toEqual({ ok: true, protocol: "paperclip-runner/1", stream: "paperclip-runner.stream.v1", encodings: ["utf8", "base64"] });
  });
});

describe("POST /run (the seed's contract)", () => {
  it("replaces the environment: the command sees exactly env (plus what bash itself sets)", async () => {
    const { status, json } = await run({ script: "env", env: ENV, envMode: "replace" });
    expect(status).toBe(200);
    const names = (json.stdout as string)
      .split("\n")
      .filter(Boolean)
      .map((line) => line.slice(0, line.indexOf("=")))
      .sort();
    expect(names).toEqual(["HOME", "ONLY_THIS", "PATH", "PWD", "SHLVL", "_"]);
    expect(json).toMatchObject({ exitCode: 0, signal: null, timedOut: false, stderr: "" });
  });

  it("runs /bin/bash --noprofile --norc -c: no profile, no rc file, not a login shell", async () => {
    await run({ script: "echo 'echo FROM-RC' > ~/.bashrc; echo 'echo FROM-PROFILE' > ~/.bash_profile; echo 'echo FROM-PROFILE' > ~/.profile", env: ENV, envMode: "replace" });
    const { json } = await run({ script: 'echo "$0 $BASH_VERSION" | cut -c1-9; shopt -q login_shell && echo login || echo not-login; [[ -n x ]] && echo bash-syntax', env: ENV, envMode: "replace" });
    expect(json.stdout).toBe("/bin/bash\nnot-login\nbash-syntax\n");
  });

  it("writes stdin then closes it; no stdin is an immediate EOF", async () => {
    expect((await run({ script: "cat; echo end", stdin: "line one\nline two", env: ENV, envMode: "replace" })).json.stdout).toBe("line one\nline twoend\n");
    expect((await run({ script: "cat; echo eof", stdin: null, env: ENV, envMode: "replace" })).json.stdout).toBe("eof\n");
    expect((await run({ script: "cat; echo eof", env: ENV, envMode: "replace" })).json.stdout).toBe("eof\n");
  });

  it("reports exit codes and signals, and separates stdout from stderr", async () => {
    expect((await run({ script: "echo out; echo err >&2; exit 7", env: ENV, envMode: "replace" })).json).toMatchObject({ exitCode: 7, signal: null, stdout: "out\n", stderr: "err\n" });
    expect((await run({ script: "kill -TERM $$", env: ENV, envMode: "replace" })).json).toMatchObject({ exitCode: null, signal: "SIGTERM" });
  });

  it("ends the whole process group at timeoutMs and says timedOut", async () => {
    const { json } = await run({ script: "sleep 1201 & sleep 1202; echo never", env: ENV, envMode: "replace", timeoutMs: 300 });
    expect(json).toMatchObject({ exitCode: null, timedOut: true });
    expect(json.stdout).toBe("");
    expect(await alive("sleep 120[12]")).toBe("gone");
  });

  it("keeps background processes a command leaves behind (a server it starts)", async () => {
    await run({ script: "nohup sleep 1301 >/dev/null 2>&1 &", env: ENV, envMode: "replace" });
    expect(await alive("sleep 1301")).toBe("alive");
    await run({ script: "pkill -f 'sleep 1301'; true", env: ENV, envMode: "replace" });
  });

  it("ends the command's group when the caller goes away", async () => {
    const abort = new AbortController();
    const pending = run({ script: "sleep 1401 & sleep 1402", env: ENV, envMode: "replace" }, abort.signal).catch(() => "aborted");
    await new Promise((r) => setTimeout(r, 500));
    expect(await alive("sleep 140[12]")).toBe("alive");
    abort.abort();
    expect(await pending).toBe("aborted");
    for (let i = 0; i < 50 && (await alive("sleep 140[12]")) === "alive"; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await alive("sleep 140[12]")).toBe("gone");
  });

  it("carries any bytes with encoding base64 (an extension of the contract)", async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const { json } = await run({ script: "cat; printf '\\377\\000' >&2", stdin: bytes.toString("base64"), encoding: "base64", env: ENV, envMode: "replace" });
    expect(json.encoding).toBe("base64");
    expect(Buffer.from(json.stdout, "base64")).toEqual(bytes);
    expect(Buffer.from(json.stderr, "base64")).toEqual(Buffer.from([0xff, 0x00]));
  });

  it("refuses a request it cannot honour with 400 and a reason", async () => {
    expect(await run({ script: "true", env: ENV })).toEqual({ status: 400, json: { error: "bad_env_mode", message: 'envMode: must be "replace" (the command gets exactly env; got undefined)' } });
    expect((await run({ script: "true", env: ENV, envMode: "merge" })).json.error).toBe("bad_env_mode");
    expect((await run({ script: "", envMode: "replace" })).json).toEqual({ error: "bad_script", message: "script: must be a non-empty string" });
    expect((await run({ script: "true", envMode: "replace", env: { "BAD NAME": "x" } })).json.error).toBe("bad_env");
    expect((await run({ script: "true", envMode: "replace", timeoutMs: -1 })).json.error).toBe("bad_timeout");
    expect((await run({ script: "true", envMode: "replace", cwd: "/nonexistent/dir" })).json.error).toBe("cannot_start");
    const notFound = await fetch(`${app}/nope`, { headers: cookie() });
    expect(notFound.status).toBe(404);
  });
});

describe("GET /stream (WebSocket)", () => {
  interface Session {
    socket: WebSocket;
    stdout: Buffer[];
    stderr: Buffer[];
    started: Promise<{ pid: number }>;
    done: Promise<{ exit?: { exitCode: number | null; signal: string | null; timedOut: boolean }; error?: { error: string }; code: number }>;
  }
  const open = (start: Record<string, unknown>): Session => {
    const socket = new WebSocket(`${app.replace("http", "ws")}/stream`, { headers: cookie() });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let exit: any;
    let error: any;
    let onStarted: (value: { pid: number }) => void;
    const started = new Promise<{ pid: number }>((resolve) => (onStarted = resolve));
    socket.on("open", () => socket.send(frame(MSG_START, start)));
    socket.on("message", (data: Buffer) => {
      const body = data.subarray(1);
      if (data[0] === MSG_STARTED) onStarted(JSON.parse(body.toString()));
      else if (data[0] === MSG_STDOUT) stdout.push(Buffer.from(body));
      else if (data[0] === MSG_STDERR) stderr.push(Buffer.from(body));
      else if (data[0] === MSG_EXIT) exit = JSON.parse(body.toString());
      else if (data[0] === MSG_ERROR) error = JSON.parse(body.toString());
    });
    const done = new Promise<any>((resolve) => socket.on("close", (code) => resolve({ exit, error, code })));
    return { socket, stdout, stderr, started, done };
  };

  it("streams stdin with EOF and every byte value both ways, stdout and stderr apart", async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const session = open({ script: "cat; printf done >&2", env: ENV, envMode: "replace", stdin: true });
    await session.started;
    session.socket.send(frame(MSG_STDIN, bytes.subarray(0, 100)));
    session.socket.send(frame(MSG_STDIN, bytes.subarray(100)));
    session.socket.send(frame(MSG_STDIN_END));
    const { exit, code } = await session.done;
    expect(exit).toEqual({ exitCode: 0, signal: null, timedOut: false });
    expect(code).toBe(1000);
    expect(Buffer.concat(session.stdout)).toEqual(bytes);
    expect(Buffer.concat(session.stderr).toString()).toBe("done");
  });

  it("delivers output while the command runs", async () => {
    const session = open({ script: "echo first; read line; echo second", env: ENV, envMode: "replace", stdin: true });
    await session.started;
    for (let i = 0; i < 100 && Buffer.concat(session.stdout).toString() !== "first\n"; i++) await new Promise((r) => setTimeout(r, 50));
    expect(Buffer.concat(session.stdout).toString()).toBe("first\n");
    session.socket.send(frame(MSG_STDIN, Buffer.from("go\n")));
    await session.done;
    expect(Buffer.concat(session.stdout).toString()).toBe("first\nsecond\n");
  });

  it("a SIGNAL message ends the whole group", async () => {
    const session = open({ script: "sleep 1501 & sleep 1502", env: ENV, envMode: "replace" });
    await session.started;
    session.socket.send(frame(MSG_SIGNAL, { graceMs: 0 }));
    const { exit } = await session.done;
    expect(exit?.exitCode).toBeNull();
    expect(exit?.signal).toMatch(/^SIG(TERM|KILL)$/);
    expect(await alive("sleep 150[12]")).toBe("gone");
  });

  it("a dropped connection ends the whole group", async () => {
    const session = open({ script: "sleep 1601 & sleep 1602", env: ENV, envMode: "replace" });
    await session.started;
    expect(await alive("sleep 160[12]")).toBe("alive");
    session.socket.terminate();
    for (let i = 0; i < 60 && (await alive("sleep 160[12]")) === "alive"; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await alive("sleep 160[12]")).toBe("gone");
  });

  it("enforces timeoutMs and says timedOut", async () => {
    const { exit } = await open({ script: "sleep 30", env: ENV, envMode: "replace", timeoutMs: 200 }).done;
    expect(exit).toMatchObject({ exitCode: null, timedOut: true });
  });

  it("refuses a bad START with an ERROR message", async () => {
    const { error, exit } = await open({ script: "true", env: ENV }).done;
    expect(exit).toBeUndefined();
    expect(error?.error).toBe("bad_env_mode");
  });
});
