// The bridge Worker's own behaviour, run for real in workerd (miniflare) with @cloudflare/sandbox
// 0.7.21 over the stand-in container: auth, the keepalive of a silent streamed command (15 s
// compressed to 100 ms), the last chunk of a command that prints and exits at once, and timeouts
// under both session strategies leaving nothing running.
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-cloudflare";
import { loadPluginPackage, startWorker } from "@paperclip-sandbox/worker-client";
import { reuseAcrossHostRuns } from "./__fixtures__/host-reuse.js";

/** The real interval is 15 s; here 100 ms, so a silent 40 s command takes ~270 ms. */
const SCALE = 150;
const emu = await runEmulator(emulator, { options: { keepaliveMs: 15_000 / SCALE } });
afterAll(() => emu.close(), 60_000);

const base = `${emu.url}/api/paperclip-sandbox/v1`;
const auth = { authorization: `Bearer ${emu.credentials.token}` };
const post = (path: string, body: unknown, headers: Record<string, string> = auth) =>
  fetch(`${base}${path}`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) });
const postJson = async <T = Record<string, unknown>>(path: string, body: unknown): Promise<T> => {
  const response = await post(path, body);
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as T;
};

async function lease(extra: Record<string, unknown> = {}): Promise<string> {
  const answer = await postJson<{ providerLeaseId: string }>("/leases/acquire", { environmentId: "env", runId: `run-${Math.random().toString(36).slice(2)}`, ...extra });
  return answer.providerLeaseId;
}

const sh = (providerLeaseId: string, script: string, extra: Record<string, unknown> = {}) => post("/exec", { providerLeaseId, command: "sh", args: ["-c", script], ...extra });

/** What a second session sees running (the lease's own session may have been deleted). */
async function running(providerLeaseId: string): Promise<string> {
  const answer = await postJson<{ stdout: string }>("/exec", { providerLeaseId, command: "sh", args: ["-c", "ps -eo args"], sessionId: "inspector" });
  return answer.stdout;
}

/** The raw frames of an SSE body as they arrive (comments included); null at its end. */
function frameReader(body: ReadableStream<Uint8Array>): { next(): Promise<string | null> } {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  return {
    async next() {
      for (;;) {
        const at = buffer.indexOf("\n\n");
        if (at >= 0) {
          const frame = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          return frame;
        }
        const { value, done } = await reader.read();
        if (done) return null;
        buffer += decoder.decode(value, { stream: true });
      }
    },
  };
}

/** The next event of a frame reader, keepalive comments skipped. */
async function nextEvent(frames: { next(): Promise<string | null> }): Promise<{ event: string; data: unknown }> {
  for (;;) {
    const frame = await frames.next();
    if (frame === null) throw new Error("the stream ended");
    if (frame.startsWith(":")) continue;
    return events(frame)[0] as { event: string; data: unknown };
  }
}

function events(text: string): Array<{ event: string; data: unknown } | { comment: string }> {
  return text
    .split("\n\n")
    .filter((frame) => frame.trim() !== "")
    .map((frame) => {
      if (frame.startsWith(":")) return { comment: frame.slice(1).trim() };
      const event = /^event: (.*)$/m.exec(frame)?.[1] ?? "message";
      return { event, data: JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "null") };
    });
}

describe("bridge auth", () => {
  it.each([
    ["no Authorization header", {}],
    ["a wrong token", { authorization: "Bearer not-the-token" }],
    ["the token under another scheme", { authorization: `Basic ${emu.credentials.token}` }],
    ["an empty bearer", { authorization: "Bearer " }],
  ])("refuses %s on every route, health included", async (_name, headers) => {
    for (const [method, path] of [
      ["GET", "/health"],
      ["POST", "/leases/acquire"],
      ["POST", "/exec"],
      ["GET", "/leases"],
    ] as const) {
      const response = await fetch(`${base}${path}`, { method, headers: { ...headers, "content-type": "application/json" }, ...(method === "POST" ? { body: "{}" } : {}) });
      expect(response.status).toBe(401);
      expect(await response.json()).toEqual({ error: "unauthorized", message: "Missing or invalid bridge bearer token." });
    }
  });

  it("accepts the bearer scheme in any case and answers health with its extensions", async () => {
    const response = await fetch(`${base}/health`, { headers: { authorization: `bEaReR ${emu.credentials.token}` } });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ ok: true, provider: "cloudflare", capabilities: { reuseLease: true, namedSessions: true, extensions: { files: true, leaseLabels: true } } });
  });
});

describe("bridge exec", () => {
  it("keeps a silent streamed command's connection alive with keepalive comments, then completes", async () => {
    const id = await lease();
    const release = `/tmp/keepalive-release-${Math.random().toString(36).slice(2)}`;
    // Silent for 40 s of the bridge's clock, then until this test has seen two keepalive comments
    // (no upper bound on time: the command waits for the test, not the other way round).
    const silent40s = (40 / SCALE).toFixed(3);
    const response = await sh(id, `sleep ${silent40s}; while [ ! -e ${release} ]; do sleep 0.02; done; echo woke`, { streamOutput: true });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const frames = frameReader(response.body!);
    let keepalives = 0;
    while (keepalives < 2) {
      const frame = await frames.next();
      expect(frame, "the stream ended while the command was silent").not.toBeNull();
      expect(frame, "an event before the command printed anything").toBe(": keepalive");
      keepalives += 1;
    }
    await postJson("/exec", { providerLeaseId: id, command: "touch", args: [release], sessionId: "inspector" });
    const rest: string[] = [];
    for (let frame = await frames.next(); frame !== null; frame = await frames.next()) rest.push(frame);
    const last = events(rest.filter((f) => !f.startsWith(":")).join("\n\n")).at(-1);
    expect(last).toEqual({ event: "complete", data: { exitCode: 0, signal: null, timedOut: false, stdout: "woke\n", stderr: "" } });
  });

  it("keeps the last chunk of a command that prints and exits in the same tick (bridge channel: never streamed)", async () => {
    const id = await lease();
    const response = await sh(id, "printf 'first\\nlast-chunk-without-newline'", { streamOutput: true, env: { PAPERCLIP_SANDBOX_EXEC_CHANNEL: "bridge" } });
    // Answered on the non-streaming path: JSON, whatever the client asked for.
    expect(response.headers.get("content-type")).toContain("application/json");
    const result = (await response.json()) as { stdout: string; exitCode: number };
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain("last-chunk-without-newline");
  });

  it("ends a timed-out command's whole process group under the named strategy (non-streamed)", async () => {
    const id = await lease();
    const response = await sh(id, "sleep 300 & sleep 301; echo never", { timeoutMs: 500 });
    expect(await response.json()).toMatchObject({ exitCode: null, timedOut: true, stdout: "" });
    expect(await running(id)).not.toMatch(/sleep 30[01]/);
    // The lease still works: the session is made again on its next command.
    expect(await (await sh(id, "echo again")).json()).toMatchObject({ exitCode: 0, stdout: "again" });
  });

  it("ends a streamed command at its deadline (the SDK's streamed exec has none) and leaves nothing running", async () => {
    const id = await lease();
    const response = await sh(id, "echo started; sleep 302 & sleep 303", { timeoutMs: 600, streamOutput: true });
    const frames = events(await response.text());
    expect(frames).toContainEqual({ event: "stdout", data: { data: "started\n" } });
    expect(frames.at(-1)).toMatchObject({ event: "complete", data: { exitCode: null, timedOut: true } });
    expect(await running(id)).not.toMatch(/sleep 30[23]/);
  });

  it("destroys the whole sandbox when a command times out under the default strategy", async () => {
    const id = await lease({ sessionStrategy: "default" });
    await sh(id, "echo marker > /tmp/marker", { sessionStrategy: "default" });
    const before = await emu.leftovers();
    const response = await sh(id, "sleep 304", { timeoutMs: 500, sessionStrategy: "default" });
    expect(await response.json()).toMatchObject({ exitCode: null, timedOut: true });
    // Its container is gone; the next command gets a fresh, empty one.
    expect((await emu.leftovers()).length).toBe(before.length - 1);
    expect(await (await sh(id, "cat /tmp/marker 2>/dev/null || echo fresh", { sessionStrategy: "default" })).json()).toMatchObject({ stdout: "fresh" });
    await fetch(`${base}/leases/${id}`, { method: "DELETE", headers: auth });
  });

  it("answers unknown routes with upstream's not_found and bad exec bodies with invalid_request", async () => {
    const unknown = await fetch(`${base}/nope`, { headers: auth });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: "not_found", message: "No bridge route matched GET /api/paperclip-sandbox/v1/nope." });
    const bad = await post("/exec", { command: "true" });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: "invalid_request", message: "providerLeaseId and command are required." });
  });
});

describe("bridge streamed processes (the streams extension)", () => {
  const startProcess = (providerLeaseId: string, script: string, extra: Record<string, unknown> = {}, signal?: AbortSignal) =>
    fetch(`${base}/exec`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ providerLeaseId, command: "sh", args: ["-c", script], streamOutput: true, outputEncoding: "base64", ...extra }),
      ...(signal ? { signal } : {}),
    });

  /** The events of a process stream, frames decoded. */
  async function collect(response: Response): Promise<{ started?: { processId: string; pid: number }; stdout: Buffer; stderr: Buffer; complete?: Record<string, unknown>; error?: string }> {
    const out = { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) } as Awaited<ReturnType<typeof collect>>;
    for (const frame of events(await response.text())) {
      if (!("event" in frame)) continue;
      const data = frame.data as Record<string, string>;
      if (frame.event === "start") out.started = frame.data as { processId: string; pid: number };
      else if (frame.event === "stdout" || frame.event === "stderr") out[frame.event] = Buffer.concat([out[frame.event], Buffer.from(data.base64!, "base64")]);
      else if (frame.event === "complete") out.complete = frame.data as Record<string, unknown>;
      else if (frame.event === "error") out.error = data.error;
    }
    return out;
  }

  it("relays every byte of stdout and stderr unchanged (NULs, invalid UTF-8, no last newline) with the exit code", async () => {
    const id = await lease();
    const result = await collect(await startProcess(id, "printf 'a\\000b\\377\\376'; printf 'e\\000rr' >&2; exit 7"));
    expect(result.started?.pid).toBeGreaterThan(0);
    expect(result.stdout).toEqual(Buffer.from([0x61, 0, 0x62, 0xff, 0xfe]));
    expect(result.stderr).toEqual(Buffer.from("e\0rr", "latin1"));
    expect(result.complete).toEqual({ exitCode: 7, signal: null, timedOut: false, stdout: "", stderr: "" });
  });

  it("feeds stdin parts in order and ends it at the close mark, bytes unchanged", async () => {
    const id = await lease();
    const response = await startProcess(id, "od -An -tx1 -v | tr -s ' \\n' ' '", { stdinStream: true });
    const frames = frameReader(response.body!);
    const start = (await nextEvent(frames)).data as { processId: string };
    const parts = [Buffer.from([0, 1, 2]), Buffer.from([0xff, 0x0a]), Buffer.from("z")];
    for (const [seq, bytes] of parts.entries()) {
      const put = await fetch(`${base}/exec/${start.processId}/stdin?providerLeaseId=${id}&seq=${seq}`, { method: "PUT", headers: auth, body: bytes });
      expect(put.status).toBe(200);
    }
    expect((await post(`/exec/${start.processId}/stdin/close`, { providerLeaseId: id, seq: parts.length })).status).toBe(200);
    const rest: string[] = [];
    for (let frame = await frames.next(); frame !== null; frame = await frames.next()) rest.push(frame);
    const decoded = events(rest.filter((f) => !f.startsWith(":")).join("\n\n"));
    const text = decoded
      .filter((f): f is { event: string; data: { base64: string } } => "event" in f && f.event === "stdout")
      .map((f) => Buffer.from(f.data.base64, "base64").toString())
      .join("");
    expect(text.trim()).toBe("00 01 02 ff 0a 7a");
    expect(decoded.at(-1)).toMatchObject({ event: "complete", data: { exitCode: 0 } });
  });

  it("ends the whole process group on a kill", async () => {
    const id = await lease();
    const response = await startProcess(id, "sleep 311 & sleep 312");
    const frames = frameReader(response.body!);
    const start = (await nextEvent(frames)).data as { processId: string };
    expect((await post(`/exec/${start.processId}/kill`, { providerLeaseId: id, signal: "SIGTERM" })).status).toBe(200);
    const rest: string[] = [];
    for (let frame = await frames.next(); frame !== null; frame = await frames.next()) rest.push(frame);
    expect(events(rest.filter((f) => !f.startsWith(":")).join("\n\n")).at(-1)).toMatchObject({ event: "complete", data: { exitCode: 143, timedOut: false } });
    expect(await running(id)).not.toMatch(/sleep 31[12]/);
  });

  it("ends a process whose client went away", async () => {
    const id = await lease();
    const connection = new AbortController();
    const response = await startProcess(id, "sleep 313 & sleep 314", {}, connection.signal);
    const frames = frameReader(response.body!);
    expect((await nextEvent(frames)).event).toBe("start");
    expect(await running(id)).toMatch(/sleep 314/);
    connection.abort();
    // The bridge learns it at its next write (a keepalive, every 100 ms here), then ends the group.
    let left = await running(id);
    while (/sleep 31[34]/.test(left)) left = await running(id);
    expect(left).not.toMatch(/sleep 31[34]/);
  });

  it("refuses a process, a stdin part, a kill and file transfers on a destroyed lease without booting a container", async () => {
    const id = await lease();
    await fetch(`${base}/leases/${id}`, { method: "DELETE", headers: auth });
    const before = await emu.leftovers();
    const gone = { error: "sandbox_state_lost", message: "Cloudflare sandbox state is no longer available." };
    const started = await startProcess(id, "true");
    expect(started.status).toBe(409);
    expect(await started.json()).toEqual(gone);
    const processId = "00000000-0000-4000-8000-000000000000";
    const put = await fetch(`${base}/exec/${processId}/stdin?providerLeaseId=${id}&seq=0`, { method: "PUT", headers: auth, body: "x" });
    expect(put.status).toBe(409);
    expect((await post(`/exec/${processId}/kill`, { providerLeaseId: id })).status).toBe(409);
    const upload = await fetch(`${base}/files?providerLeaseId=${id}&path=/tmp/x`, { method: "PUT", headers: auth, body: "x" });
    expect(upload.status).toBe(409);
    expect(await upload.json()).toEqual(gone);
    expect((await fetch(`${base}/files?providerLeaseId=${id}&path=/etc/hostname`, { headers: auth })).status).toBe(409);
    expect(await emu.leftovers()).toEqual(before);
  });

  it("refuses a process id it did not make (it is a path component in the sandbox)", async () => {
    const id = await lease();
    const response = await post("/exec/..%2F..%2Fetc/kill", { providerLeaseId: id });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: "invalid_request", message: "processId must be a process id this bridge returned." });
  });
});

describe("the plugin's runner choice", () => {
  it("resumes a reusable lease after the host's workspace upload emptied the workspace (the template's sentinel spot)", async () => {
    const { first, resumed, marker } = await reuseAcrossHostRuns({ bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token! });
    expect(resumed).toBe(first);
    expect(marker).toBe("kept");
  });

  it("runs a command as a streamed process by default, and as one JSON exec with live output off", async () => {
    // The command channel off: its start (a staging exec beside the first command) is not this test's.
    const worker = await startWorker(await loadPluginPackage(fileURLToPath(new URL("..", import.meta.url))), { env: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: "off" } });
    const ids = { companyId: "company-runner", environmentId: "environment-runner" };
    const modes: Record<string, unknown[]> = {};
    try {
      for (const liveOutput of [true, false]) {
        const base = { driverKey: "cloudflare", ...ids, issueId: "issue-1", config: { bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token!, liveOutput } };
        const lease = await worker.env.acquireLease({ ...base, runId: `run-${liveOutput}`, agentId: "agent-1", executionWorkspaceId: "ws-1", adapterType: "claude_local" });
        const mark = emu.requests.mark();
        expect(await worker.env.execute({ ...base, lease, command: "printf", args: ["%s", "out"] })).toMatchObject({ exitCode: 0, stdout: "out" });
        // A streamed exec's record finishes when the Worker's stream ends, which can be after the
        // client read its completion event: count it while it runs (its mode is noted at the start).
        modes[String(liveOutput)] = emu.requests.list({ since: mark, route: "/api/paperclip-sandbox/v1/exec", includeRunning: true }).map((r) => r.notes.execMode);
        await worker.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata ?? {} });
      }
    } finally {
      await worker.shutdown();
    }
    expect(modes).toEqual({ true: ["process"], false: ["json"] });
  });
});
