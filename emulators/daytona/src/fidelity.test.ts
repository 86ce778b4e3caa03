// Fidelity: the emulator driven through @daytonaio/sdk's own public API, method by method, beyond
// what the daytona provider calls: files and folders, permissions, processes, sessions, code-run,
// ports, pause/resume, resize, TTL, snapshots, listing, the Socket.IO event stream, refusals and
// the daemon's and API's own error answers. Its last test checks the README's coverage table
// against every operation of the SDK's generated clients.
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { io } from "socket.io-client";
import { Daytona, DaytonaError, DaytonaFileNotFoundError, DaytonaValidationError, type Sandbox } from "@daytonaio/sdk";
import { coverageReport, coverageTable, createManualClock, runEmulator, withCoverageTable, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { daytonaSdkOperations } from "./__fixtures__/sdk-operations.js";
import { DAYTONA_COVERAGE } from "./coverage.js";
import { emulator } from "./index.js";

let emu: RunningEmulator;
let sdk: Daytona;
let box: Sandbox;
beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  sdk = new Daytona({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url, useDeprecatedPolling: true });
  box = await sdk.create({ autoStopInterval: 0 });
});
afterAll(async () => {
  await box?.delete(60, true).catch(() => undefined);
  await emu?.close();
}, 60_000);

const origin = () => emu.url.replace(/\/api$/, "");
const auth = () => ({ authorization: `Bearer ${emu.credentials.apiKey}` });
/** A raw answer's JSON body: the API's error body by default. */
const json = async <T = { message: string }>(answer: Response): Promise<T> => (await answer.json()) as T;
type SnapshotPage = { items: Array<{ name: string }>; total: number; page: number; totalPages: number };

describe("files and folders (FileSystem)", () => {
  it("createFolder answers 201 with the mode asked for; listFiles and getFileDetails see it", async () => {
    await box.fs.createFolder("/workspace/made/deep", "750");
    const details = await box.fs.getFileDetails("/workspace/made/deep");
    expect(details).toMatchObject({ name: "deep", isDir: true, permissions: "0750", mode: "drwxr-x---", owner: "1000", group: "1000" });
    expect((await box.fs.listFiles("/workspace/made")).map((f) => f.name)).toEqual(["deep"]);
    const raw = await fetch(`${emu.endpoints.toolbox}/${box.id}/files/folder?path=/workspace/raw`, { method: "POST", headers: auth() });
    expect(raw.status).toBe(201);
  });

  it("deleteFile: 204 for a file, 400 for a directory without recursive, 404 FILE_NOT_FOUND for a missing path", async () => {
    await box.fs.uploadFile(Buffer.from("x"), "/workspace/del/a.txt");
    await box.fs.deleteFile("/workspace/del/a.txt");
    await expect(box.fs.getFileDetails("/workspace/del/a.txt")).rejects.toBeInstanceOf(DaytonaError);
    await expect(box.fs.deleteFile("/workspace/del")).rejects.toMatchObject({ statusCode: 400, message: "cannot delete directory without recursive flag" });
    await box.fs.deleteFile("/workspace/del", true);
    await expect(box.fs.deleteFile("/workspace/none")).rejects.toBeInstanceOf(DaytonaFileNotFoundError);
    const raw = await fetch(`${emu.endpoints.toolbox}/${box.id}/files?path=/workspace/none`, { method: "DELETE", headers: auth() });
    expect(raw.status).toBe(404);
    expect(await raw.json()).toMatchObject({ statusCode: 404, code: "FILE_NOT_FOUND", source: "DAYTONA_DAEMON" });
  });

  it("setFilePermissions: chmod and chown (own uid); another owner is FILE_ACCESS_DENIED; a missing path FILE_NOT_FOUND", async () => {
    await box.fs.uploadFile(Buffer.from("#!/bin/sh\necho ran\n"), "/workspace/tool.sh");
    await box.fs.setFilePermissions("/workspace/tool.sh", { mode: "755" });
    expect((await box.fs.getFileDetails("/workspace/tool.sh")).permissions).toBe("0755");
    expect((await box.process.executeCommand("/workspace/tool.sh")).result).toBe("ran\n");
    await box.fs.setFilePermissions("/workspace/tool.sh", { owner: "1000", group: "1000" });
    await expect(box.fs.setFilePermissions("/workspace/tool.sh", { owner: "root" })).rejects.toMatchObject({ statusCode: 403 });
    await expect(box.fs.setFilePermissions("/workspace/missing", { mode: "644" })).rejects.toBeInstanceOf(DaytonaFileNotFoundError);
  });

  it("moveFiles, findFiles (text lines), searchFiles (globs), replaceInFiles (per-file results)", async () => {
    await box.fs.uploadFiles([
      { source: Buffer.from("alpha\nneedle one\n"), destination: "/workspace/src/a.ts" },
      { source: Buffer.from("needle two\n"), destination: "/workspace/src/lib/b.ts" },
      { source: Buffer.from("no match\n"), destination: "/workspace/src/c.md" },
    ]);
    await box.fs.moveFiles("/workspace/src/c.md", "/workspace/src/d.md");
    expect((await box.fs.listFiles("/workspace/src")).map((f) => f.name).sort()).toEqual(["a.ts", "d.md", "lib"]);
    const found = await box.fs.findFiles("/workspace/src", "needle");
    expect(found.map((m) => [m.file, m.line, m.content]).sort()).toEqual([
      ["/workspace/src/a.ts", 2, "needle one"],
      ["/workspace/src/lib/b.ts", 1, "needle two"],
    ]);
    expect((await box.fs.searchFiles("/workspace/src", "**/*.ts")).files.sort()).toEqual(["/workspace/src/a.ts", "/workspace/src/lib/b.ts"]);
    const replaced = await box.fs.replaceInFiles(["/workspace/src/a.ts", "/workspace/src/none.ts"], "needle", "pin");
    expect(replaced.map((r) => [r.file, r.success])).toEqual([
      ["/workspace/src/a.ts", true],
      ["/workspace/src/none.ts", false],
    ]);
    expect((await box.fs.downloadFile("/workspace/src/a.ts")).toString()).toBe("alpha\npin one\n");
  });

  it("the single-file download and upload routes of the generated client", async () => {
    const form = new FormData();
    form.append("file", new Blob([Buffer.from([0, 1, 2, 255])]), "bin");
    const up = await fetch(`${emu.endpoints.toolbox}/${box.id}/files/upload?path=/workspace/one.bin`, { method: "POST", headers: auth(), body: form });
    expect(up.status).toBe(200);
    const down = await fetch(`${emu.endpoints.toolbox}/${box.id}/files/download?path=/workspace/one.bin`, { headers: auth() });
    expect(Buffer.from(await down.arrayBuffer())).toEqual(Buffer.from([0, 1, 2, 255]));
  });
});

describe("processes, sessions, code-run and ports (Process)", () => {
  it("executeCommand and codeRun (python, argv and env)", async () => {
    expect(await box.process.executeCommand("echo $A", undefined, { A: "b" })).toMatchObject({ exitCode: 0, result: "b\n" });
    const run = await box.process.codeRun('import sys, os\nprint(sys.argv[1:], os.environ["K"])', { argv: ["x"], env: { K: "v" } });
    expect(run).toMatchObject({ exitCode: 0, result: "['x'] v\n" });
  });

  it("session commands take stdin (sendSessionCommandInput) and report their exit", async () => {
    await box.process.createSession("input");
    const started = await box.process.executeSessionCommand("input", { command: "read line; echo got:$line", runAsync: true });
    await box.process.sendSessionCommandInput("input", started.cmdId!, "hello\n");
    await vi.waitFor(async () => expect((await box.process.getSessionCommand("input", started.cmdId!)).exitCode).toBe(0), { timeout: 10_000 });
    expect((await box.process.getSessionCommandLogs("input", started.cmdId!)).stdout).toBe("got:hello\n");
    expect((await box.process.listSessions()).map((s) => s.sessionId)).toContain("input");
    await expect(box.process.getEntrypointSession()).rejects.toMatchObject({ statusCode: 404 });
    await box.process.deleteSession("input");
  });

  it("ports: a listening socket is reported; another port is not in use", async () => {
    await box.process.createSession("server");
    await box.process.executeSessionCommand("server", { command: "exec node -e \"require('net').createServer().listen(8123)\"", runAsync: true });
    const toolbox = `${emu.endpoints.toolbox}/${box.id}`;
    await vi.waitFor(async () => expect(((await (await fetch(`${toolbox}/port`, { headers: auth() })).json()) as { ports: number[] }).ports).toContain(8123), { timeout: 10_000 });
    expect(await (await fetch(`${toolbox}/port/8124/in-use`, { headers: auth() })).json()).toEqual({ isInUse: false });
    await box.process.deleteSession("server");
  });
});

describe("lifecycle (Sandbox)", () => {
  it("pause keeps the processes (frozen), start resumes them; the toolbox answers 502 while paused", async () => {
    const sandbox = await sdk.create({ autoStopInterval: 0 });
    await sandbox.process.executeCommand("nohup sh -c 'echo $$ > /tmp/pid; sleep 300' >/dev/null 2>&1 &");
    await sandbox.pause();
    expect(sandbox.state).toBe("paused");
    await expect(sandbox.process.executeCommand("true")).rejects.toMatchObject({ statusCode: 502 });
    await sandbox.start();
    expect((await sandbox.process.executeCommand('kill -0 "$(cat /tmp/pid)" && echo alive')).result).toBe("alive\n");
    await sandbox.delete(60, true);
  });

  it("intervals, TTL, labels, activity and resize; recover refuses a healthy sandbox", async () => {
    const sandbox = await sdk.create({ autoStopInterval: 10, labels: { a: "1" } });
    await sandbox.setAutoPauseInterval(5);
    expect([sandbox.autoPauseInterval, (await sdk.get(sandbox.id)).autoStopInterval]).toEqual([5, 0]);
    await sandbox.setTtl(60);
    expect(Date.parse((await sdk.get(sandbox.id)).autoDestroyAt!)).toBeGreaterThan(Date.now());
    await sandbox.setLabels({ b: "2" });
    expect((await sdk.get(sandbox.id)).labels).toEqual({ b: "2" });
    await sandbox.refreshActivity();
    await sandbox.stop();
    await sandbox.resize({ disk: 5, cpu: 2 });
    expect((await sdk.get(sandbox.id)).disk).toBe(5);
    await expect(sandbox.recover()).rejects.toBeInstanceOf(DaytonaValidationError);
    await sandbox.delete(60, true);
  });

  it("intervals run on the vendor clock: a manual clock moved past auto-pause pauses the sandbox", async () => {
    const clock = createManualClock();
    const timed = await runEmulator(emulator, { options: { clock, sweepMs: 10 } });
    try {
      const client = new Daytona({ apiKey: timed.credentials.apiKey!, apiUrl: timed.url, useDeprecatedPolling: true });
      const sandbox = await client.create({ autoPauseInterval: 2, autoStopInterval: 0, ttlMinutes: 10 });
      expect(Date.parse(sandbox.autoDestroyAt!)).toBe(clock.now() + 10 * 60_000);
      await clock.advance(119_000);
      expect((await client.get(sandbox.id)).state).toBe("started");
      await clock.advance(1_000);
      await vi.waitFor(async () => expect((await client.get(sandbox.id)).state).toBe("paused"));
      await clock.advance(8 * 60_000);
      await vi.waitFor(async () => expect(await timed.leftovers()).toEqual([]));
    } finally {
      await timed.close();
    }
  });
});

describe("snapshots and listing", () => {
  it("the snapshot registry: create (active at once), get, list, deactivate/activate, delete; a sandbox from it", async () => {
    const made = await sdk.snapshot.create({ name: "fidelity-snap", image: "python:3.12-slim" });
    expect(made).toMatchObject({ name: "fidelity-snap", state: "active" });
    expect((await sdk.snapshot.get("fidelity-snap")).id).toBe(made.id);
    expect((await sdk.snapshot.list()).items.map((s) => s.name)).toContain("fidelity-snap");
    const sandbox = await sdk.create({ snapshot: "fidelity-snap" });
    expect(sandbox.snapshot).toBe("fidelity-snap");
    await sandbox.delete(60, true);
    await sdk.snapshot.delete(made);
    await expect(sdk.snapshot.get("fidelity-snap")).rejects.toMatchObject({ statusCode: 404 });
  });

  it("a sandbox's snapshot (createSnapshot): snapshotting, back to started, its files in a sandbox made from it; deleted, gone", async () => {
    const source = await sdk.create({ autoStopInterval: 0 });
    await source.fs.uploadFile(Buffer.from("captured\n"), "/workspace/tool.txt");
    await source.process.executeCommand('mkdir -p "$HOME/work" && echo in-home > "$HOME/work/a.txt"');
    const mark = emu.requests.mark();
    await source.createSnapshot("fidelity-from-sandbox");
    expect(source.state).toBe("started");
    expect(emu.requests.list({ since: mark }).map((r) => `${r.method} ${r.route}`)).toContain("POST /api/sandbox/:sandboxIdOrName/snapshot");
    await expect(source.createSnapshot("fidelity-from-sandbox")).rejects.toMatchObject({ statusCode: 409 });
    const snapshot = await sdk.snapshot.get("fidelity-from-sandbox");
    expect(snapshot).toMatchObject({ name: "fidelity-from-sandbox", state: "active", sourceSandboxId: source.id });
    // Written after the snapshot: not part of it.
    await source.fs.uploadFile(Buffer.from("later\n"), "/workspace/later.txt");
    const copy = await sdk.create({ snapshot: "fidelity-from-sandbox", autoStopInterval: 0 });
    expect((await copy.process.executeCommand('cat /workspace/tool.txt "$HOME/work/a.txt"; test -e /workspace/later.txt || echo no-later')).result).toBe("captured\nin-home\nno-later\n");
    await Promise.all([copy.delete(60, true), source.delete(60, true)]);
    await sdk.snapshot.delete("fidelity-from-sandbox");
    await expect(sdk.snapshot.get("fidelity-from-sandbox")).rejects.toMatchObject({ statusCode: 404 });
  });

  it("the registry list pages, filters by partial name (any case), sorts as asked (default: last used first, never used last)", async () => {
    const api = (path: string) => fetch(`${emu.url}${path}`, { headers: auth() });
    const made = [];
    for (const name of ["pager-b", "pager-a", "PAGER-c"]) made.push(await sdk.snapshot.create({ name, image: "python:3.12-slim" }));
    try {
      const first = await json<SnapshotPage>(await api("/snapshots?name=pager&limit=2"));
      expect(first).toMatchObject({ total: 3, page: 1, totalPages: 2 });
      expect(first.items).toHaveLength(2);
      const second = await json<SnapshotPage>(await api("/snapshots?name=pager&limit=2&page=2"));
      expect(second.items).toHaveLength(1);
      expect(new Set([...first.items, ...second.items].map((s) => s.name))).toEqual(new Set(["pager-a", "pager-b", "PAGER-c"]));
      const byName = await json<SnapshotPage>(await api("/snapshots?name=pager&sort=name&order=asc"));
      expect(byName.items.map((s) => s.name.toLowerCase())).toEqual(["pager-a", "pager-b", "pager-c"]);
      // Used by a sandbox: first by default; the others (never used) after it.
      const used = await sdk.create({ snapshot: "pager-a" });
      await used.delete(60, true);
      expect((await json<SnapshotPage>(await api("/snapshots?name=pager"))).items[0]?.name).toBe("pager-a");
      expect(await json<SnapshotPage>(await api("/snapshots?name=no-such-snapshot"))).toEqual({ items: [], total: 0, page: 1, totalPages: 0 });
      const badSort = await api("/snapshots?sort=size");
      expect(badSort.status).toBe(400);
      expect((await json(badSort)).message).toMatch(/^sort must be one of/);
    } finally {
      for (const snapshot of made) await sdk.snapshot.delete(snapshot);
    }
  });

  it("delete, activate and deactivate take the id (a name is 400; the SDK resolves names first); deactivate is 204; the API's own 404, 409 and 400 bodies", async () => {
    const post = (path: string, body?: unknown) =>
      fetch(`${emu.url}${path}`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const made = await sdk.snapshot.create({ name: "by-id-only", image: "python:3.12-slim" });
    const byName = await post("/snapshots/by-id-only/deactivate");
    expect([byName.status, (await json(byName)).message]).toEqual([400, "Validation failed (uuid is expected)"]);
    expect((await fetch(`${emu.url}/snapshots/by-id-only`, { method: "DELETE", headers: auth() })).status).toBe(400);
    const off = await post(`/snapshots/${made.id}/deactivate`);
    expect([off.status, await off.text()]).toEqual([204, ""]);
    expect((await sdk.snapshot.get("by-id-only")).state).toBe("inactive");
    expect(await sdk.snapshot.activate("by-id-only")).toMatchObject({ id: made.id, state: "active" });
    // Again: an active snapshot is answered as it is.
    expect((await json<{ state: string }>(await post(`/snapshots/${made.id}/activate`))).state).toBe("active");
    const duplicate = await post("/snapshots", { name: "by-id-only", imageName: "python:3.12-slim" });
    expect([duplicate.status, (await json(duplicate)).message]).toEqual([409, 'Snapshot with name "by-id-only" already exists']);
    const badName = await post("/snapshots", { name: "two words", imageName: "python:3.12-slim" });
    expect([badName.status, (await json(badName)).message]).toEqual([400, "Invalid snapshot name format. May contain letters, digits, dots, colons, and dashes"]);
    await sdk.snapshot.delete("by-id-only");
    const gone = await fetch(`${emu.url}/snapshots/by-id-only`, { headers: auth() });
    expect([gone.status, (await json(gone)).message]).toEqual([404, "Snapshot by-id-only not found"]);
    expect((await fetch(`${emu.url}/snapshots/${made.id}`, { method: "DELETE", headers: auth() })).status).toBe(404);
  });

  it("a snapshot of a missing sandbox is 404; a nameless one 400", async () => {
    const answer = await fetch(`${emu.url}/sandbox/nope/snapshot`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: JSON.stringify({ name: "x" }) });
    expect(answer.status).toBe(404);
    const nameless = await fetch(`${emu.url}/sandbox/${box.id}/snapshot`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: JSON.stringify({}) });
    expect(nameless.status).toBe(400);
  });

  it("lists by labels and states across cursor pages", async () => {
    const a = await sdk.create({ labels: { fid: "list" } });
    const b = await sdk.create({ labels: { fid: "list" } });
    await b.stop();
    const seen: string[] = [];
    for await (const found of sdk.list({ labels: { fid: "list" }, limit: 1 })) seen.push(`${found.id}:${found.state}`);
    expect(seen.sort()).toEqual([`${a.id}:started`, `${b.id}:stopped`].sort());
    const started: string[] = [];
    for await (const found of sdk.list({ labels: { fid: "list" }, states: ["started"] as never })) started.push(found.id);
    expect(started).toEqual([a.id]);
    await Promise.all([a.delete(60, true), b.delete(60, true)]);
  });
});

describe("the Socket.IO event stream", () => {
  it("the SDK's default (events, no polling flag) connects over WebSocket and its waits see the state events", async () => {
    const live = new Daytona({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url });
    const mark = emu.requests.mark();
    const sandbox = await live.create({ autoStopInterval: 0 });
    await sandbox.stop();
    await sandbox.start();
    await sandbox.delete(60, true);
    await live[Symbol.asyncDispose]();
    await emu.requests.idle();
    const socketCalls = emu.requests.list({ since: mark }).filter((r) => r.path.startsWith("/api/socket.io"));
    expect(socketCalls.map((r) => [r.protocol, r.status])).toEqual([["ws", 101]]);
    expect(emu.requests.list({ since: mark, unserved: true })).toEqual([]);
  });

  it("announces sandbox.created and sandbox.state.updated ({sandbox, oldState, newState}); a bad token is refused", async () => {
    const events: Array<[string, string]> = [];
    const socket = io(origin(), { path: "/api/socket.io/", transports: ["websocket"], auth: { token: emu.credentials.apiKey }, reconnection: false });
    socket.on("sandbox.created", (dto: { id: string; state: string }) => events.push(["created", dto.state]));
    socket.on("sandbox.state.updated", (event: { sandbox: { id: string }; oldState: string; newState: string }) => events.push([event.oldState, event.newState]));
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("connect_error", reject);
    });
    const sandbox = await sdk.create({ autoStopInterval: 0 });
    await sandbox.stop();
    await vi.waitFor(() =>
      expect(events).toEqual([
        ["created", "creating"],
        ["creating", "started"],
        ["started", "stopping"],
        ["stopping", "stopped"],
      ]),
    );
    socket.close();
    await sandbox.delete(60, true);

    const refused = io(origin(), { path: "/api/socket.io/", transports: ["websocket"], auth: { token: "dtn_wrong" }, reconnection: false });
    const error = await new Promise<Error>((resolve) => refused.once("connect_error", resolve));
    refused.close();
    expect(error.message).toBe("Unauthorized");
  });
});

describe("pseudo-terminals (createPty, connectPty, resize, kill)", () => {
  const text = (chunks: Uint8Array[]) => Buffer.concat(chunks).toString("utf8");

  it("createPty runs a login shell on a terminal: typed input is echoed and run, envs and cwd apply, the exit code comes back", async () => {
    const chunks: Uint8Array[] = [];
    const pty = await box.process.createPty({ id: "fid-shell", cols: 100, rows: 30, cwd: "/tmp", envs: { FID_VAR: "from-envs" }, onData: (d) => void chunks.push(d) });
    expect(pty.isConnected()).toBe(true);
    await pty.sendInput("[ -t 0 ] && echo tty=$(stty size) cwd=$(pwd) var=$FID_VAR term=$TERM\n");
    await vi.waitFor(() => expect(text(chunks)).toMatch(/tty=30 100 cwd=\/tmp var=from-envs term=xterm-256color/), { timeout: 20_000 });
    const info = await box.process.getPtySessionInfo("fid-shell");
    expect(info).toMatchObject({ id: "fid-shell", active: true, cols: 100, rows: 30, cwd: "/tmp", lazyStart: false, envs: { FID_VAR: "from-envs", TERM: "xterm-256color" } });
    expect((await box.process.listPtySessions()).map((s) => s.id)).toContain("fid-shell");
    await pty.sendInput("exit 7\n");
    expect(await pty.wait()).toEqual({ exitCode: 7, error: "non-zero exit" });
    await expect(box.process.getPtySessionInfo("fid-shell")).rejects.toMatchObject({ statusCode: 404 });
  });

  it("resize changes the terminal in one step; kill ends the session with 137 (SIGKILL); a second id is a conflict", async () => {
    const chunks: Uint8Array[] = [];
    const pty = await box.process.createPty({ id: "fid-resize", onData: (d) => void chunks.push(d) });
    await expect(box.process.createPty({ id: "fid-resize", onData: () => undefined })).rejects.toBeTruthy();
    expect(await box.process.resizePtySession("fid-resize", 132, 43)).toMatchObject({ cols: 132, rows: 43 });
    await pty.sendInput("echo size=$(stty size)\n");
    await vi.waitFor(() => expect(text(chunks)).toContain("size=43 132"), { timeout: 20_000 });
    await expect(box.process.resizePtySession("fid-resize", 1000, 10)).rejects.toMatchObject({ statusCode: 400 });
    await pty.kill();
    expect(await pty.wait()).toEqual({ exitCode: 137, error: "SIGKILL" });
    await expect(box.process.killPtySession("fid-resize")).rejects.toMatchObject({ statusCode: 404 });
  });

  it("connectPty attaches another client to a running session: both see the output, either can type", async () => {
    const first: Uint8Array[] = [];
    const second: Uint8Array[] = [];
    const a = await box.process.createPty({ id: "fid-two", onData: (d) => void first.push(d) });
    const b = await box.process.connectPty("fid-two", { onData: (d) => void second.push(d) });
    await b.sendInput("echo from-$((40 + 2))\n");
    await vi.waitFor(() => expect([text(first), text(second)].every((t) => t.includes("from-42"))).toBe(true), { timeout: 20_000 });
    await a.sendInput("exit\n");
    expect(await a.wait()).toEqual({ exitCode: 0, error: undefined });
    expect((await b.wait()).exitCode).toBe(0);
    await expect(box.process.connectPty("fid-two", { onData: () => undefined })).rejects.toThrow(/PTY session not found/);
    await emu.requests.idle();
    expect(await emu.leftovers()).not.toContainEqual(expect.stringContaining("pty session"));
  });
});

describe("errors and refusals", () => {
  it("an unknown toolbox route answers as gin does (plain 404 page not found); an unknown API route as NestJS does", async () => {
    const toolbox = await fetch(`${emu.endpoints.toolbox}/${box.id}/files/nope`, { headers: auth() });
    expect(toolbox.status).toBe(404);
    expect(await toolbox.text()).toBe("404 page not found");
    const api = await fetch(`${emu.url}/nothing-here`, { headers: auth() });
    expect(api.status).toBe(404);
    expect(await api.json()).toEqual({ message: "Cannot GET /api/nothing-here", error: "Not Found", statusCode: 404 });
    await emu.requests.idle();
    expect(
      emu.requests
        .list({ unserved: true })
        .slice(-2)
        .map((r) => r.unserved),
    ).toEqual(["no route", "no route"]);
  });

  it("refused operations answer 501 with the reason from the coverage table, in each plane's error body", async () => {
    await expect(box.git.clone("https://example.invalid/repo.git", "/workspace/repo")).rejects.toMatchObject({
      statusCode: 501,
      message: expect.stringContaining("emulator limit: jails have no network"),
    });
    await expect(box._experimental_fork()).rejects.toMatchObject({ statusCode: 501, message: expect.stringContaining("no copy-on-write") });
  });
});

describe("coverage", () => {
  it("every operation of the SDK's generated clients is classified, none is 'not yet', and the README's table is current", () => {
    const report = coverageReport(DAYTONA_COVERAGE, daytonaSdkOperations());
    expect(report.unclassified).toEqual([]);
    expect(report.stale).toEqual([]);
    expect(report.counts["not yet"]).toBe(0);
    const readmeUrl = new URL("../README.md", import.meta.url);
    const readme = readFileSync(readmeUrl, "utf8");
    // UPDATE_COVERAGE=1 rewrites the README's generated table (between its coverage markers).
    if (process.env.UPDATE_COVERAGE) writeFileSync(readmeUrl, withCoverageTable(readme, coverageTable(report)));
    else expect(readme).toContain(coverageTable(report));
  });
});
