// Fidelity: the emulator driven through Modal's two published JS SDK majors, each through its own
// public API — 0.11.1 (V2 sandboxes) and 0.7.6 (V1 sandboxes, its `sb.open()` file API over
// ContainerFilesystemExec) — method by method: files, the entrypoint's stdio, exec, tags, names,
// listing, readiness, tunnels, snapshots, refusals. The last test checks the README's coverage
// table against every method of the services both SDKs bundle.
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { coverageReport, coverageTable, runEmulator, withCoverageTable, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { modalSdkOperations } from "./__fixtures__/sdk-operations.js";
import { MODAL_COVERAGE } from "./coverage.js";
import { emulator } from "./index.js";

// Both SDKs read ~/.modal.toml when imported and MODAL_SERVER_URL when a client is made.
process.env.MODAL_CONFIG_PATH = "/nonexistent/modal.toml";
const modern = await import("modal");
const legacy = await import("modal-0.7");

let emu: RunningEmulator;
const closers: Array<() => void> = [];
beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  process.env.MODAL_SERVER_URL = emu.url;
});
afterAll(async () => {
  for (const close of closers) close();
  delete process.env.MODAL_SERVER_URL;
  await emu?.close();
});

function modernClient() {
  const client = new modern.ModalClient({ tokenId: emu.credentials.tokenId!, tokenSecret: emu.credentials.tokenSecret!, logLevel: "error" });
  closers.push(() => client.close());
  return client;
}
function legacyClient() {
  const client = new legacy.ModalClient({ tokenId: emu.credentials.tokenId!, tokenSecret: emu.credentials.tokenSecret!, logLevel: "error" });
  closers.push(() => client.close());
  return client;
}

describe("modal 0.7.6 (the previous major: V1 sandboxes)", () => {
  let mc: ReturnType<typeof legacyClient>;
  let sb: Awaited<ReturnType<ReturnType<typeof legacyClient>["sandboxes"]["create"]>>;
  beforeAll(async () => {
    mc = legacyClient();
    const app = await mc.apps.fromName("fidelity-07", { createIfMissing: true });
    sb = await mc.sandboxes.create(app, mc.images.fromRegistry("alpine:3.21"), { command: ["sh", "-c", "read line; echo got:$line; echo err >&2; sleep 300"] });
  });
  afterAll(() => sb?.terminate());

  it("creates a V1 sandbox and execs through the router", async () => {
    expect(sb.sandboxId).toMatch(/^sb-[0-9A-Za-z]{22}$/);
    const p = await sb.exec(["sh", "-c", "echo out; echo err >&2; exit 4"]);
    expect([await p.stdout.readText(), await p.stderr.readText(), await p.wait()]).toEqual(["out\n", "err\n", 4]);
  });

  it("sb.open(): write, flush, close, then read back over ContainerFilesystemExec (the issue's missing method)", async () => {
    const mark = emu.requests.mark();
    const written = await sb.open("/tmp/legacy.txt", "w");
    await written.write(new TextEncoder().encode("line one\n"));
    await written.write(new TextEncoder().encode("line two\n"));
    await written.flush();
    await written.close();
    const appended = await sb.open("/tmp/legacy.txt", "a");
    await appended.write(new TextEncoder().encode("three\n"));
    await appended.close();
    const read = await sb.open("/tmp/legacy.txt", "r");
    expect(new TextDecoder().decode(await read.read())).toBe("line one\nline two\nthree\n");
    await read.close();
    const p = await sb.exec(["cat", "/tmp/legacy.txt"]);
    expect(await p.stdout.readText()).toBe("line one\nline two\nthree\n");
    await emu.requests.idle();
    const calls = emu.requests.list({ since: mark, protocol: "grpc" }).filter((r) => r.path.includes("ContainerFilesystemExec"));
    expect(calls.length).toBeGreaterThanOrEqual(14);
    expect(calls.every((r) => r.code === "OK")).toBe(true);
  });

  it("sb.open() of a missing file fails with the errno text (SandboxFilesystemError)", async () => {
    await expect(sb.open("/tmp/none/nothing.txt", "r")).rejects.toMatchObject({ name: "SandboxFilesystemError", message: expect.stringContaining("No such file or directory") });
  });

  it("sb.filesystem (fs-tools over exec) in 0.7.6 too", async () => {
    await sb.filesystem.writeText("hello", "/workspace/seven/a.txt");
    expect(await sb.filesystem.readText("/workspace/seven/a.txt")).toBe("hello");
    expect((await sb.filesystem.listFiles("/workspace/seven")).map((e) => e.name)).toEqual(["a.txt"]);
  });

  it("the entrypoint's stdio: stdin by index (SandboxStdinWrite), stdout and stderr (SandboxGetLogs)", async () => {
    await sb.stdin.writeText("v1\n");
    await sb.stdin.close();
    const reader = sb.stdout.getReader();
    const first = await reader.read();
    reader.releaseLock();
    expect(first.value).toBe("got:v1\n");
    const errs = sb.stderr.getReader();
    expect((await errs.read()).value).toBe("err\n");
    errs.releaseLock();
  });

  it("tags, list and terminate (137)", async () => {
    await sb.setTags({ suite: "fidelity-07" });
    expect(await sb.getTags()).toEqual({ suite: "fidelity-07" });
    const app = await mc.apps.fromName("fidelity-07");
    const listed: string[] = [];
    for await (const found of mc.sandboxes.list({ appId: app.appId, tags: { suite: "fidelity-07" } })) listed.push(found.sandboxId);
    expect(listed).toEqual([sb.sandboxId]);
    const other = await mc.sandboxes.create(app, mc.images.fromRegistry("alpine:3.21"));
    await other.terminate();
    expect(await other.wait()).toBe(137);
  });
});

describe("modal 0.11.1 (V2 sandboxes)", () => {
  let mc: ReturnType<typeof modernClient>;
  let app: Awaited<ReturnType<ReturnType<typeof modernClient>["apps"]["fromName"]>>;
  beforeAll(async () => {
    mc = modernClient();
    app = await mc.apps.fromName("fidelity-11", { createIfMissing: true });
  });

  it("the entrypoint's stdio over the router (SandboxStdioReadV2, SandboxStdinWriteV2) and its exit", async () => {
    const sb = await mc.sandboxes.create(app, mc.images.fromRegistry("alpine:3.21"), { command: ["sh", "-c", "read line; echo got:$line; echo err >&2; exit 3"] });
    await sb.stdin.writeText("v2\n");
    await sb.stdin.close();
    expect(await sb.stdout.readText()).toBe("got:v2\n");
    expect(await sb.stderr.readText()).toBe("err\n");
    expect(await sb.wait()).toBe(3);
  });

  it("readiness, tunnels, names, tags, fromName and listing", async () => {
    const sb = await mc.sandboxes.create(app, mc.images.fromRegistry("alpine:3.21"), { name: "fid-named" });
    try {
      await sb.waitUntilReady(5_000);
      expect(await sb.tunnels()).toEqual({});
      await sb.experimentalSetName("fid-renamed");
      expect((await mc.sandboxes.fromName("fidelity-11", "fid-renamed")).sandboxId).toBe(sb.sandboxId);
      await sb.setTags({ suite: "fidelity-11" });
      expect(await sb.getTags()).toEqual({ suite: "fidelity-11" });
      const listed: string[] = [];
      for await (const found of mc.sandboxes.list({ appId: app.appId, tags: { suite: "fidelity-11" } })) listed.push(found.sandboxId);
      expect(listed).toEqual([sb.sandboxId]);
    } finally {
      await sb.terminate();
    }
  });

  it("files through sb.filesystem; a filesystem snapshot another sandbox starts from", async () => {
    const sb = await mc.sandboxes.create(app, mc.images.fromRegistry("alpine:3.21"));
    try {
      await sb.filesystem.makeDirectory("/workspace/d");
      await sb.filesystem.writeText("kept", "/workspace/d/f.txt");
      expect(await sb.filesystem.stat("/workspace/d/f.txt")).toMatchObject({ type: "file", size: 4 });
      await expect(sb.filesystem.readText("/workspace/none")).rejects.toMatchObject({ name: "SandboxFilesystemNotFoundError" });
      const image = await sb.snapshotFilesystem();
      const restored = await mc.sandboxes.create(app, image);
      expect(await restored.filesystem.readText("/workspace/d/f.txt")).toBe("kept");
      await restored.terminate();
    } finally {
      await sb.terminate();
    }
  });

  it("exec with pty: true runs on a terminal of pty_info's size and TERM: stdin is typed (echoed), ^C interrupts, the exit code comes back", async () => {
    const sb = await mc.sandboxes.create(app, mc.images.fromRegistry("alpine:3.21"));
    try {
      const proc = await sb.exec(["/bin/sh", "-c", 'if [ -t 0 ] && [ -t 1 ]; then echo "tty=$(stty size) term=$TERM color=$COLORTERM"; fi; IFS= read -r x; echo "got[$x]"; exit 4'], { pty: true });
      const output = proc.stdout.readText();
      await proc.stdin.writeText("typed-in\r");
      expect(await proc.wait()).toBe(4);
      const text = await output;
      expect(text).toContain("tty=24 80 term=xterm-256color color=truecolor\r\n");
      expect(text.indexOf("typed-in")).toBeLessThan(text.indexOf("got[typed-in]\r\n"));

      const sleeper = await sb.exec(["/bin/sh", "-c", "echo waiting; exec sleep 300"], { pty: true });
      const reader = sleeper.stdout.getReader();
      expect(String((await reader.read()).value)).toContain("waiting");
      reader.releaseLock();
      await sleeper.stdin.writeText("\x03");
      expect(await sleeper.wait()).toBe(130);
    } finally {
      await sb.terminate();
    }
  });

  it("refused on purpose: memory snapshots and connect tokens answer with the reason", async () => {
    const sb = await mc.sandboxes.create(app, mc.images.fromRegistry("alpine:3.21"));
    try {
      await expect(sb.experimentalSnapshot()).rejects.toThrow(/emulator limit: no memory snapshots/);
      await expect(sb.createConnectToken()).rejects.toThrow(/emulator limit: jails have no network/);
      await emu.requests.idle();
      expect(emu.requests.unserved().map((u) => [u.target, u.reason])).toEqual(
        expect.arrayContaining([
          ["/modal.task_command_router.TaskCommandRouter/TaskSnapshotMemory", "refused"],
          ["/modal.client.ModalClient/SandboxCreateConnectTokenV2", "refused"],
        ]),
      );
    } finally {
      await sb.terminate();
    }
  });
});

describe("coverage", () => {
  it("every method both SDKs bundle is classified, none is 'not yet', and the README's table is current", () => {
    const report = coverageReport(MODAL_COVERAGE, modalSdkOperations());
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
