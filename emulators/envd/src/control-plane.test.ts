// The control plane as both real SDKs see it: create (e2b v2, Novita v1), info, list by metadata
// with paging, timeouts on a compressed clock, pause/connect, kill, and the error answers the SDKs
// branch on.
import { afterAll, describe, expect, it, vi } from "vitest";
import * as e2b from "e2b";
import * as novita from "novita-sandbox";
import { createManualClock, runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "./index.js";

const emu = await runEmulator(emulator, { options: { maxSandboxes: 6 } });
// The sandbox timeouts run on a clock the tests move by hand: no real-clock window.
const clock = createManualClock();
const fast = await runEmulator(emulator, { options: { clock } });
afterAll(async () => {
  await emu.close();
  await fast.close();
});
const opts = (e = emu) => ({ apiKey: e.credentials.apiKey!, apiUrl: e.url, sandboxUrl: e.url });

describe("control plane (e2b SDK)", () => {
  it("creates through POST /v2/sandboxes with metadata, env and timeout, and reports them", async () => {
    const mark = emu.requests.mark();
    const sbx = await e2b.Sandbox.create("base", { ...opts(), timeoutMs: 120_000, metadata: { team: "a" }, envs: { GREETING: "hi" } });
    try {
      const info = await sbx.getInfo();
      expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: "base", metadata: { team: "a" }, state: "running", envdVersion: "0.6.4" });
      expect(info.endAt.getTime() - info.startedAt.getTime()).toBe(120_000);
      expect((await sbx.commands.run("echo $GREETING")).stdout).toBe("hi\n");
      await emu.requests.idle();
      expect(
        emu.requests
          .list({ since: mark })
          .map((r) => `${r.method} ${r.route} ${r.status}`)
          .slice(0, 2),
      ).toEqual(["POST /v2/sandboxes 201", "GET /sandboxes/:id 200"]);
    } finally {
      await sbx.kill();
    }
  });

  it("lists by metadata, running and paused, in pages linked by X-Next-Token", async () => {
    const tag = `list-${Date.now()}`;
    const made = await Promise.all([0, 1, 2].map(() => e2b.Sandbox.create("base", { ...opts(), metadata: { tag } })));
    try {
      await made[0]!.pause();
      const paginator = e2b.Sandbox.list({ ...opts(), query: { metadata: { tag } }, limit: 2 });
      const pages: string[][] = [];
      while (paginator.hasNext) pages.push((await paginator.nextItems()).map((s) => `${s.sandboxId}:${s.state}`));
      expect(pages.map((p) => p.length)).toEqual([2, 1]);
      expect(pages.flat().sort()).toEqual(made.map((s, i) => `${s.sandboxId}:${i === 0 ? "paused" : "running"}`).sort());
      const running = await e2b.Sandbox.list({ ...opts(), query: { metadata: { tag }, state: ["running"] } }).nextItems();
      expect(running.map((s) => s.sandboxId).sort()).toEqual([made[1]!.sandboxId, made[2]!.sandboxId].sort());
    } finally {
      await Promise.all(made.map((s) => e2b.Sandbox.kill(s.sandboxId, opts())));
    }
  });

  it("kill answers 204, then 404 (the SDK's false); getInfo of a killed sandbox is SandboxNotFoundError", async () => {
    const sbx = await e2b.Sandbox.create("base", opts());
    expect(await sbx.kill()).toBe(true);
    expect(await e2b.Sandbox.kill(sbx.sandboxId, opts())).toBe(false);
    await expect(e2b.Sandbox.getInfo(sbx.sandboxId, opts())).rejects.toMatchObject({ name: "SandboxNotFoundError" });
    await expect(e2b.Sandbox.connect(sbx.sandboxId, opts())).rejects.toMatchObject({ name: "SandboxNotFoundError" });
  });

  it("pause is 204 then 409 (already paused: false); envd refuses a paused sandbox; connect resumes it with its processes", async () => {
    const sbx = await e2b.Sandbox.create("base", opts());
    try {
      // Replaced by a rename, so a read never meets the file truncated mid-write.
      const counter = await sbx.commands.run("i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.05; done", { background: true });
      await vi.waitFor(() => sbx.files.read("/tmp/n"));
      expect(await sbx.pause()).toBe(true);
      expect(await sbx.pause()).toBe(false);
      await expect(counter.wait()).rejects.toThrow(); // its stream broke with the pause
      // envd behind the proxy answers 502 (unavailable): the SDK says the sandbox is probably not running.
      await expect(sbx.commands.run("true")).rejects.toMatchObject({ name: "SandboxNotFoundError", message: expect.stringMatching(/probably not running/) });
      expect(await sbx.isRunning()).toBe(false);
      expect((await e2b.Sandbox.getInfo(sbx.sandboxId, opts())).state).toBe("paused");
      const again = await e2b.Sandbox.connect(sbx.sandboxId, opts());
      const before = Number((await again.files.read("/tmp/n")).trim());
      // Resumed, not restarted: it counts on from where it was.
      await vi.waitFor(async () => expect(Number((await again.files.read("/tmp/n")).trim())).toBeGreaterThan(before));
      expect((await again.commands.list()).map((p) => p.pid)).toContain(counter.pid);
    } finally {
      await e2b.Sandbox.kill(sbx.sandboxId, opts());
    }
  });

  it("refuses a missing or wrong key with 401, an unknown template with 404, and a full quota with 429 and no Retry-After", async () => {
    await expect(e2b.Sandbox.create("base", { ...opts(), apiKey: "e2b_wrong" })).rejects.toMatchObject({ name: "AuthenticationError" });
    await expect(e2b.Sandbox.create("nope", opts())).rejects.toThrow(/404: template 'nope' not found/);
    const held = [];
    try {
      for (;;) {
        try {
          held.push(await e2b.Sandbox.create("base", opts()));
        } catch (error) {
          expect(error).toMatchObject({ name: "RateLimitError" });
          break;
        }
        if (held.length > 6) throw new Error("quota never refused a create");
      }
      const refused = emu.requests.list({ route: "/v2/sandboxes", status: 429 });
      expect(refused.length).toBe(1); // no Retry-After: the SDK did not retry
    } finally {
      await Promise.all(held.map((s) => s.kill()));
    }
  });
});

describe("sandbox timeouts on the vendor clock", () => {
  it("a sandbox is killed at its timeout; setTimeout moves it from now", async () => {
    const sbx = await e2b.Sandbox.create("base", { ...opts(fast), timeoutMs: 30_000 });
    await clock.advance(10_000);
    await sbx.setTimeout(60_000); // from now: 60 s, past the first 30 s
    await clock.advance(35_000);
    expect(await sbx.isRunning()).toBe(true);
    expect((await sbx.getInfo()).endAt.getTime()).toBe(clock.now() + 25_000);
    await clock.advance(25_000);
    await expect(sbx.getInfo()).rejects.toMatchObject({ name: "SandboxNotFoundError" });
    expect(await fast.leftovers()).toEqual([]);
  });

  it("connect() extends a running sandbox's timeout but never shortens it; on a paused one it resets the timeout (300 s by default)", async () => {
    const sbx = await e2b.Sandbox.create("base", { ...opts(fast), timeoutMs: 900_000 });
    try {
      const created = (await sbx.getInfo()).endAt.getTime();
      expect(created).toBe(clock.now() + 900_000);
      await e2b.Sandbox.connect(sbx.sandboxId, { ...opts(fast), timeoutMs: 60_000 });
      expect((await sbx.getInfo()).endAt.getTime()).toBe(created);
      await e2b.Sandbox.connect(sbx.sandboxId, { ...opts(fast), timeoutMs: 1_200_000 });
      expect((await sbx.getInfo()).endAt.getTime()).toBe(clock.now() + 1_200_000);
      await sbx.pause();
      // The SDK sends no timeout: the resumed sandbox gets 300 s, whatever it had before.
      await e2b.Sandbox.connect(sbx.sandboxId, opts(fast));
      expect((await sbx.getInfo()).endAt.getTime()).toBe(clock.now() + 300_000);
    } finally {
      await sbx.kill();
    }
  });

  it("with autoPause (Novita's lifecycle onTimeout: pause) a timed-out sandbox is paused, not killed", async () => {
    const sbx = await novita.Sandbox.create("base", { ...opts(fast), timeoutMs: 20_000, lifecycle: { onTimeout: "pause" } });
    await clock.advance(19_999);
    expect((await novita.Sandbox.getInfo(sbx.sandboxId, opts(fast))).state).toBe("running");
    await clock.advance(1);
    await vi.waitFor(async () => expect((await novita.Sandbox.getInfo(sbx.sandboxId, opts(fast))).state).toBe("paused"));
    await novita.Sandbox.kill(sbx.sandboxId, opts(fast));
  });
});

describe("snapshot templates (e2b SDK)", () => {
  it("a named snapshot of a sandbox is a template in the team namespace; a sandbox from it has the copied files (not later ones); listed by sandbox and name; deleted, gone", async () => {
    const source = await e2b.Sandbox.create("base", opts());
    try {
      await source.commands.run('echo captured > "$HOME/tool.txt"');
      const made = await e2b.Sandbox.createSnapshot(source.sandboxId, { ...opts(), name: "my-snap" });
      expect(made).toEqual({ snapshotId: "emulator-team/my-snap:default", names: ["emulator-team/my-snap"] });
      // A nameless one is known by its template id.
      const nameless = await e2b.Sandbox.createSnapshot(source.sandboxId, opts());
      expect(nameless).toEqual({ snapshotId: expect.stringMatching(/^[0-9a-f]{20}:default$/), names: [] });
      await source.commands.run('echo later > "$HOME/later.txt"');
      expect((await source.commands.run("echo still-running")).stdout).toBe("still-running\n");
      const bySandbox = await e2b.Sandbox.listSnapshots({ ...opts(), sandboxId: source.sandboxId }).nextItems();
      expect(bySandbox.map((s) => s.snapshotId).sort()).toEqual([made.snapshotId, nameless.snapshotId].sort());
      expect((await e2b.Sandbox.listSnapshots({ ...opts(), name: "my-snap" }).nextItems()).map((s) => s.snapshotId)).toEqual([made.snapshotId]);
      for (const ref of [made.snapshotId, "my-snap", nameless.snapshotId]) {
        const copy = await e2b.Sandbox.create(ref, opts());
        try {
          expect((await copy.commands.run('cat "$HOME/tool.txt"; test -e "$HOME/later.txt" || echo no-later')).stdout).toBe("captured\nno-later\n");
        } finally {
          await copy.kill();
        }
      }
      expect(await e2b.Sandbox.deleteSnapshot(made.snapshotId, opts())).toBe(true);
      expect(await e2b.Sandbox.deleteSnapshot(made.snapshotId, opts())).toBe(false);
      expect(await e2b.Sandbox.deleteSnapshot(nameless.snapshotId, opts())).toBe(true);
      await expect(e2b.Sandbox.create(made.snapshotId, opts())).rejects.toThrow(/not found/);
    } finally {
      await source.kill();
    }
  });

  it("lists newest first in cursor pages the SDK's paginator walks (X-Next-Token); a forged token is 400", async () => {
    const source = await e2b.Sandbox.create("base", opts());
    const made: string[] = [];
    try {
      for (const name of ["page-1", "page-2", "page-3"]) made.push((await e2b.Sandbox.createSnapshot(source.sandboxId, { ...opts(), name })).snapshotId);
      const paginator = e2b.Sandbox.listSnapshots({ ...opts(), sandboxId: source.sandboxId, limit: 2 });
      const first = await paginator.nextItems();
      expect([first.map((s) => s.snapshotId), paginator.hasNext]).toEqual([[made[2], made[1]], true]);
      const second = await paginator.nextItems();
      expect([second.map((s) => s.snapshotId), paginator.hasNext]).toEqual([[made[0]], false]);
      const forged = await fetch(`${emu.url}/snapshots?nextToken=not-a-cursor`, { headers: { "x-api-key": emu.credentials.apiKey! } });
      expect([forged.status, ((await forged.json()) as { message: string }).message]).toEqual([400, "Invalid next token"]);
    } finally {
      for (const ref of made) await e2b.Sandbox.deleteSnapshot(ref, opts());
      await source.kill();
    }
  });

  it("names as E2B parses them: folded to lowercase, the team's namespace taken, another team's or a dot refused, another tag not kept; Template.exists finds the alias", async () => {
    const source = await e2b.Sandbox.create("base", opts());
    const post = (name: string) =>
      fetch(`${emu.url}/sandboxes/${source.sandboxId}/snapshots`, {
        method: "POST",
        headers: { "x-api-key": emu.credentials.apiKey!, "content-type": "application/json" },
        body: JSON.stringify({ name }),
      });
    try {
      expect((await e2b.Sandbox.createSnapshot(source.sandboxId, { ...opts(), name: " Mixed-Case " })).snapshotId).toBe("emulator-team/mixed-case:default");
      expect((await e2b.Sandbox.createSnapshot(source.sandboxId, { ...opts(), name: "emulator-team/in-team:default" })).snapshotId).toBe("emulator-team/in-team:default");
      const answers = [];
      for (const name of ["other-team/theirs", "dotted.name", "tagged:v1"]) {
        const answer = await post(name);
        answers.push([answer.status, ((await answer.json()) as { message: string }).message]);
      }
      expect(answers).toEqual([
        [400, "namespace 'other-team' must match your team 'emulator-team'"],
        [400, "Invalid name: invalid template ID: dotted.name"],
        [501, expect.stringMatching(/^emulator limit: /)],
      ]);
      expect(await e2b.Template.exists("mixed-case", opts())).toBe(true);
      expect(await e2b.Template.exists("base", opts())).toBe(true);
      expect(await e2b.Template.exists("never-made", opts())).toBe(false);
    } finally {
      for (const ref of ["mixed-case", "in-team"]) await e2b.Sandbox.deleteSnapshot(ref, opts());
      await source.kill();
    }
  });

  it("a snapshot of a missing sandbox is 404 (SandboxNotFoundError); a name outside E2B's alphabet is 400", async () => {
    await expect(e2b.Sandbox.createSnapshot("missing", opts())).rejects.toMatchObject({ name: "SandboxNotFoundError" });
    const answer = await fetch(`${emu.url}/sandboxes/missing/snapshots`, {
      method: "POST",
      headers: { "x-api-key": emu.credentials.apiKey!, "content-type": "application/json" },
      body: JSON.stringify({ name: "Bad Name" }),
    });
    expect(answer.status).toBe(400);
  });
});

describe("control plane (novita-sandbox SDK)", () => {
  it("creates through v1 POST /sandboxes (secure: an access token), connects through v1, pauses without a body", async () => {
    const mark = emu.requests.mark();
    const sbx = await novita.Sandbox.create("base", { ...opts(), timeoutMs: 60_000, metadata: { who: "novita" } });
    try {
      expect((await sbx.commands.run("echo ok")).stdout).toBe("ok\n");
      expect(await novita.Sandbox.pause(sbx.sandboxId, opts())).toBe(true);
      const again = await novita.Sandbox.connect(sbx.sandboxId, { ...opts(), timeoutMs: 30_000 });
      expect((await again.commands.run("echo back")).stdout).toBe("back\n");
      const found = await novita.Sandbox.list({ ...opts(), query: { metadata: { who: "novita" } } }).nextItems();
      expect(found.map((s) => s.sandboxId)).toEqual([sbx.sandboxId]);
      await emu.requests.idle();
      const routes = emu.requests.list({ since: mark }).map((r) => `${r.method} ${r.route} ${r.status}`);
      expect(routes).toEqual(expect.arrayContaining(["POST /sandboxes 201", "POST /sandboxes/:id/pause 204", "POST /sandboxes/:id/connect 201", "GET /v2/sandboxes 200"]));
      // Secure by default: envd calls carry X-Access-Token (redacted in the recorder).
      const start = emu.requests.list({ since: mark, route: "/process.Process/Start" })[0]!;
      expect(start.headers["x-access-token"]).toBe("[redacted]");
      expect(start.headers["novita-sandbox-id"]).toBe(sbx.sandboxId);
    } finally {
      await novita.Sandbox.kill(sbx.sandboxId, opts());
    }
  });

  it("answers every error with a JSON body carrying the numeric code (Novita's SDK takes an empty one for success)", async () => {
    const response = await fetch(`${emu.url}/sandboxes/missing`, { method: "DELETE", headers: { "x-api-key": emu.credentials.apiKey! } });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ code: 404, message: expect.stringContaining("missing") });
    expect(await novita.Sandbox.kill("missing", opts())).toBe(false);
  });
});
