// The emulator as Modal's own JS SDK (modal 0.11.1) sees it: every call below goes through the real
// SDK's gRPC client, so the emulator must decode exactly what the SDK sends and answer what it reads.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createManualClock, runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "./index.js";

// The SDK reads ~/.modal.toml when it is imported and MODAL_SERVER_URL when a client is made.
process.env.MODAL_CONFIG_PATH = "/nonexistent/modal.toml";
const { ModalClient } = await import("modal");
type Client = InstanceType<typeof ModalClient>;

let emu: RunningEmulator;
const clients: Client[] = [];

function client(overrides: { tokenSecret?: string; v1?: boolean } = {}, target: RunningEmulator = emu): Client {
  const saved = { url: process.env.MODAL_SERVER_URL, v2: process.env.MODAL_SANDBOX_V2 };
  process.env.MODAL_SERVER_URL = target.url;
  if (overrides.v1) process.env.MODAL_SANDBOX_V2 = "false";
  try {
    const made = new ModalClient({ tokenId: target.credentials.tokenId!, tokenSecret: overrides.tokenSecret ?? target.credentials.tokenSecret!, logLevel: "error" });
    clients.push(made);
    return made;
  } finally {
    process.env.MODAL_SERVER_URL = saved.url;
    if (saved.v2 === undefined) delete process.env.MODAL_SANDBOX_V2;
    else process.env.MODAL_SANDBOX_V2 = saved.v2;
  }
}

async function sandboxOf(mc: Client, params: Record<string, unknown> = {}) {
  const app = await mc.apps.fromName("emu-test", { createIfMissing: true });
  const image = mc.images.fromRegistry("alpine:3.21");
  return mc.sandboxes.create(app, image, { workdir: "/workspace/w", ...params });
}

beforeAll(async () => {
  emu = await runEmulator(emulator, { options: { timeScale: 100 } });
});

afterAll(async () => {
  for (const mc of clients) mc.close();
  await emu?.close();
});

describe("modal emulator through the real SDK", () => {
  it("refuses a wrong token secret at AuthTokenGet (UNAUTHENTICATED)", async () => {
    const mc = client({ tokenSecret: "as-wrong" });
    await expect(mc.apps.fromName("emu-test", { createIfMissing: true })).rejects.toMatchObject({ code: 16 });
  });

  it("creates a V2 sandbox, execs with separate streams, stdin and exit codes, then terminates it", async () => {
    const mc = client();
    const sb = await sandboxOf(mc, { env: { GREETING: "hi" }, tags: { team: "a" } });
    expect(sb.sandboxId).not.toMatch(/^sb-[0-9A-Za-z]{22}$/);

    const p = await sb.exec(["sh", "-c", 'printf "$GREETING:"; pwd; echo oops >&2; exit 3'], { mode: "text" });
    const [out, err, code] = await Promise.all([p.stdout.readText(), p.stderr.readText(), p.wait()]);
    expect({ out, err, code }).toEqual({ out: "hi:/workspace/w\n", err: "oops\n", code: 3 });

    const cat = await sb.exec(["sh", "-c", "wc -c; echo done"], { mode: "text" });
    await cat.stdin.writeText("12345");
    await cat.stdin.close();
    expect(await cat.stdout.readText()).toBe("5\ndone\n");
    expect(await cat.wait()).toBe(0);

    expect(await sb.getTags()).toEqual({ team: "a" });
    await sb.setTags({ team: "b", run: "r1" });
    const app = await mc.apps.fromName("emu-test");
    const listed: string[] = [];
    for await (const found of mc.sandboxes.list({ appId: app.appId, tags: { run: "r1" } })) listed.push(found.sandboxId);
    expect(listed).toEqual([sb.sandboxId]);

    expect(await sb.poll()).toBeNull();
    await sb.terminate();
    expect(await sb.wait()).toBe(137);
    expect(await emu.leftovers()).toEqual([]);
  });

  it("serves stdout by offset: a reader after the exit gets every byte, and EOF comes only at the exit", async () => {
    const mc = client();
    const sb = await sandboxOf(mc);
    try {
      const slow = await sb.exec(["sh", "-c", "echo first; sleep 0.6; echo second"], { mode: "text" });
      const started = Date.now();
      const text = await slow.stdout.readText();
      expect(text).toBe("first\nsecond\n");
      expect(Date.now() - started).toBeGreaterThanOrEqual(500);

      const quick = await sb.exec(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x"], { mode: "binary" });
      expect(await quick.wait()).toBe(0);
      expect((await quick.stdout.readBytes()).length).toBe(300_000);
    } finally {
      await sb.terminate();
    }
  });

  it("plays the fs-tools protocol: write, read, list, stat, mkdir, remove, and typed errors", async () => {
    const mc = client();
    const sb = await sandboxOf(mc);
    try {
      const fs = sb.filesystem;
      await fs.writeText("hello", "/workspace/w/dir/a.txt");
      expect(await fs.readText("/workspace/w/dir/a.txt")).toBe("hello");
      const big = Buffer.alloc(600_000, 7);
      await fs.writeBytes(big, "/tmp/big.bin");
      expect(Buffer.from(await fs.readBytes("/tmp/big.bin")).equals(big)).toBe(true);
      await fs.makeDirectory("/workspace/w/dir/sub");
      const names = (await fs.listFiles("/workspace/w/dir")).map((entry) => `${entry.name}:${entry.type}`);
      expect(names).toEqual(["a.txt:file", "sub:directory"]);
      expect(await fs.stat("/workspace/w/dir/a.txt")).toMatchObject({ type: "file", size: 5, permissions: "-rw-r--r--" });
      await fs.remove("/workspace/w/dir", { recursive: true });
      await expect(fs.readText("/workspace/w/dir/a.txt")).rejects.toMatchObject({ name: "SandboxFilesystemNotFoundError" });
      await expect(fs.writeText("x", "/usr/nope.txt")).rejects.toMatchObject({ name: "SandboxFilesystemPermissionError" });
    } finally {
      await sb.terminate();
    }
  });

  it("snapshots a sandbox's filesystem into an image another sandbox starts from", async () => {
    const mc = client();
    const sb = await sandboxOf(mc);
    const setup = await sb.exec(["sh", "-c", "mkdir -p $HOME/bin && printf '#!/bin/sh\\necho tool-ok\\n' > $HOME/bin/tool && chmod +x $HOME/bin/tool && echo kept > /workspace/w/file.txt"]);
    expect(await setup.wait()).toBe(0);
    const image = await sb.snapshotFilesystem();
    await sb.terminate();
    expect(await emu.leftovers()).toEqual([`image ${image.imageId} (filesystem snapshot)`]);

    const app = await mc.apps.fromName("emu-test");
    const restored = await mc.sandboxes.create(app, await mc.images.fromId(image.imageId), { workdir: "/workspace/w" });
    try {
      const check = await restored.exec(["sh", "-c", "cat file.txt; $HOME/bin/tool"], { mode: "text" });
      expect(await check.stdout.readText()).toBe("kept\ntool-ok\n");
    } finally {
      await restored.terminate();
    }
    await mc.images.delete(image.imageId);
    await expect(mc.images.fromId(image.imageId)).rejects.toMatchObject({ name: "NotFoundError" });
    expect(await emu.leftovers()).toEqual([]);
  });

  it("named images: Image.publish and images.fromName per environment, ImageNameDelete, and NotFoundError for a missing name or a deleted image", async () => {
    const mc = client();
    const sb = await sandboxOf(mc);
    const first = await sb.snapshotFilesystem({ ttlMs: null });
    const second = await sb.snapshotFilesystem({ ttlMs: null });
    await sb.terminate();
    try {
      await first.publish("emu-tpl");
      await second.publish("emu-tpl", { environment: "staging" });
      // The SDK adds `:latest`; each environment has its own name.
      expect((await mc.images.fromName("emu-tpl")).imageId).toBe(first.imageId);
      expect((await mc.images.fromName("emu-tpl:latest", { environment: "staging" })).imageId).toBe(second.imageId);
      await expect(mc.images.fromName("emu-tpl", { environment: "prod" })).rejects.toMatchObject({ name: "NotFoundError" });
      await expect(mc.images.fromName("emu-none")).rejects.toMatchObject({ name: "NotFoundError" });
      // Publishing again moves the name.
      await second.publish("emu-tpl");
      expect((await mc.images.fromName("emu-tpl")).imageId).toBe(second.imageId);
      await expect(mc.cpClient.imagePublish({ imageId: "im-missing", tag: "emu-x:latest", environmentName: "" })).rejects.toMatchObject({ code: 5 });
      await expect(mc.cpClient.imageGetByTag({ tag: "im-bad:latest", environmentName: "" })).rejects.toMatchObject({ code: 3 });

      // ImageNameDelete names no environment: the default one's name goes, the image stays.
      await mc.cpClient.imageNameDelete({ tag: "emu-tpl:latest" });
      await expect(mc.images.fromName("emu-tpl")).rejects.toMatchObject({ name: "NotFoundError" });
      await expect(mc.cpClient.imageNameDelete({ tag: "emu-tpl:latest" })).rejects.toMatchObject({ code: 5 });
      expect((await mc.images.fromId(second.imageId)).imageId).toBe(second.imageId);
      expect(await emu.leftovers()).toContain(`image name emu-tpl:latest in staging (-> ${second.imageId})`);

      // A name whose image is deleted finds nothing (and holds nothing).
      await mc.images.delete(second.imageId);
      await expect(mc.images.fromName("emu-tpl", { environment: "staging" })).rejects.toMatchObject({ name: "NotFoundError" });
      await mc.images.delete(first.imageId);
      expect(await emu.leftovers()).toEqual([]);
    } finally {
      await mc.images.delete(first.imageId).catch(() => undefined);
      await mc.images.delete(second.imageId).catch(() => undefined);
    }
  });

  it("ends sandboxes at their timeout and idle timeout on the vendor clock (124 / idle)", async () => {
    const clock = createManualClock();
    const timedEmu = await runEmulator(emulator, { options: { clock } });
    try {
      const mc = client({}, timedEmu);
      const timed = await sandboxOf(mc, { timeoutMs: 100_000 });
      await clock.advance(99_999);
      expect(await timed.poll()).toBeNull();
      await clock.advance(1);
      expect(await timed.wait()).toBe(124);

      const idle = await sandboxOf(mc, { timeoutMs: 3_600_000, idleTimeoutMs: 50_000 });
      const busy = await idle.exec(["sh", "-c", "read line"], { stdin: "pipe" } as never);
      await clock.advance(60_000);
      expect(await idle.poll()).toBeNull(); // a running exec keeps it alive past its idle timeout
      await busy.stdin.writeText("go\n");
      await busy.stdin.close();
      expect(await busy.wait()).toBe(0);
      await clock.advance(49_999);
      expect(await idle.poll()).toBeNull();
      await clock.advance(1);
      await vi.waitFor(async () => expect(await idle.poll()).not.toBeNull());
    } finally {
      await timedEmu.close();
    }
  });

  it("serves V1 sandboxes (MODAL_SANDBOX_V2=false): V1-shaped ids, task id by polling, exec, terminate", async () => {
    const mc = client({ v1: true });
    const sb = await sandboxOf(mc, { env: { A: "1" } });
    expect(sb.sandboxId).toMatch(/^sb-[0-9A-Za-z]{22}$/);
    const p = await sb.exec(["sh", "-c", "echo $A"], { mode: "text" });
    expect(await p.stdout.readText()).toBe("1\n");
    await sb.setTags({ k: "v" });
    expect(await sb.getTags()).toEqual({ k: "v" });
    await sb.terminate();
    expect(await sb.wait()).toBe(137);
  });

  it("records every call, with the secrets redacted", async () => {
    const mc = client();
    const mark = emu.requests.mark();
    const sb = await sandboxOf(mc);
    const p = await sb.exec(["true"]);
    await p.wait();
    await sb.terminate();
    await emu.requests.idle();
    const calls = emu.requests.list({ since: mark });
    expect(calls.map((c) => c.path)).toEqual(
      expect.arrayContaining(["/modal.client.ModalClient/SandboxCreateV2", "/modal.task_command_router.TaskCommandRouter/TaskExecStart", "/modal.task_command_router.TaskCommandRouter/TaskExecWait"]),
    );
    const text = JSON.stringify(calls);
    expect(text).not.toContain(emu.credentials.tokenSecret);
    expect(text).not.toContain(emu.credentials.tokenId);
  });
});
