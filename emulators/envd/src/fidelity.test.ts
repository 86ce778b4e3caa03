// Fidelity: the emulator driven through the e2b SDK's (and Novita's fork's) own public API, method by
// method, beyond what the providers call: files and folders, the default user's home, processes
// (foreground, background, connect, list, stdin, kill), lifecycle (timeout, refresh, pause/resume,
// kill), listing, the envd REST extras, refusals with their reasons. The last test checks the
// README's coverage table against every operation of the SDKs' generated clients.
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as e2b from "e2b";
import * as novita from "novita-sandbox";
import { coverageReport, coverageTable, runEmulator, withCoverageTable, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { envdSdkOperations } from "./__fixtures__/sdk-operations.js";
import { ENVD_COVERAGE } from "./coverage.js";
import { emulator } from "./index.js";

let emu: RunningEmulator;
let sbx: e2b.Sandbox;
const opts = () => ({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sandboxUrl: emu.url });
beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  sbx = await e2b.Sandbox.create("base", { ...opts(), envs: { FROM_CREATE: "yes" } });
});
afterAll(async () => {
  await sbx?.kill().catch(() => undefined);
  await emu?.close();
});

describe("files (Filesystem)", () => {
  it("write, read, list, exists, getInfo, rename, makeDir, remove, in the user's home by default", async () => {
    await sbx.files.write("notes/a.txt", "alpha");
    expect(await sbx.files.read("/home/user/notes/a.txt")).toBe("alpha");
    expect(await sbx.files.exists("notes/a.txt")).toBe(true);
    expect(await sbx.files.makeDir("notes/sub")).toBe(true);
    expect(await sbx.files.makeDir("notes/sub")).toBe(false);
    const info = await sbx.files.getInfo("notes/a.txt");
    expect(info).toMatchObject({ name: "a.txt", type: "file", path: "/home/user/notes/a.txt", size: 5, owner: "user" });
    await sbx.files.rename("notes/a.txt", "notes/b.txt");
    expect((await sbx.files.list("notes")).map((e) => e.name).sort()).toEqual(["b.txt", "sub"]);
    await sbx.files.remove("notes");
    expect(await sbx.files.exists("notes")).toBe(false);
    await expect(sbx.files.read("missing.txt")).rejects.toMatchObject({ name: "FileNotFoundError" });
  });

  it("writes many files at once and bytes unchanged", async () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    await sbx.files.write([
      { path: "multi/one.bin", data: bytes.buffer },
      { path: "multi/two.txt", data: "two" },
    ]);
    expect(Buffer.from(await sbx.files.read("multi/one.bin", { format: "bytes" }))).toEqual(Buffer.from(bytes));
    expect(await sbx.files.read("multi/two.txt")).toBe("two");
  });
});

describe("processes (Commands)", () => {
  it("foreground with env and cwd; background with stdin, connect, list and kill", async () => {
    expect((await sbx.commands.run("echo $FROM_CREATE $X; pwd", { envs: { X: "y" }, cwd: "/tmp" })).stdout).toBe("yes y\n/tmp\n");
    const bg = await sbx.commands.run("read line; echo got:$line; sleep 300", { background: true, stdin: true });
    await sbx.commands.sendStdin(bg.pid, "hi\n");
    const attached = await sbx.commands.connect(bg.pid);
    expect((await sbx.commands.list()).map((p) => p.pid)).toContain(bg.pid);
    expect(await sbx.commands.kill(bg.pid)).toBe(true);
    await expect(attached.wait()).rejects.toMatchObject({ name: "CommandExitError" });
    expect(await sbx.commands.kill(bg.pid)).toBe(false);
  });

  it("a failing command is CommandExitError with its exit code and stderr", async () => {
    await expect(sbx.commands.run("echo bad >&2; exit 9")).rejects.toMatchObject({ name: "CommandExitError", exitCode: 9, stderr: "bad\n" });
  });
});

describe("lifecycle and listing (Sandbox)", () => {
  it("setTimeout, getInfo, pause and resume by connect (a process kept), list by metadata, kill", async () => {
    const box = await e2b.Sandbox.create("base", { ...opts(), metadata: { suite: "fidelity" }, timeoutMs: 120_000 });
    await box.commands.run("sleep 300", { background: true });
    await box.setTimeout(600_000);
    const info = await box.getInfo();
    expect(info.endAt.getTime() - Date.now()).toBeGreaterThan(590_000);
    expect(await box.pause()).toBe(true);
    const listed = await e2b.Sandbox.list({ ...opts(), query: { metadata: { suite: "fidelity" } } }).nextItems();
    expect(listed.map((s) => [s.sandboxId, s.state])).toEqual([[box.sandboxId, "paused"]]);
    const resumed = await e2b.Sandbox.connect(box.sandboxId, opts());
    expect((await resumed.commands.list()).some((p) => p.cmd.includes("sleep") || p.args.join(" ").includes("sleep 300"))).toBe(true);
    expect(await e2b.Sandbox.kill(box.sandboxId, opts())).toBe(true);
  });

  it("the REST extras: refreshes extend the timeout, resume answers 409 for a running sandbox, /envs lists the env", async () => {
    const headers = { "x-api-key": emu.credentials.apiKey!, "content-type": "application/json" };
    const before = (await sbx.getInfo()).endAt.getTime();
    expect((await fetch(`${emu.url}/sandboxes/${sbx.sandboxId}/refreshes`, { method: "POST", headers, body: JSON.stringify({ duration: 3600 }) })).status).toBe(204);
    expect((await sbx.getInfo()).endAt.getTime()).toBeGreaterThan(before);
    expect((await fetch(`${emu.url}/sandboxes/${sbx.sandboxId}/resume`, { method: "POST", headers, body: "{}" })).status).toBe(409);
    const token = (await e2b.Sandbox.getFullInfo?.(sbx.sandboxId, opts()).catch(() => undefined)) as { envdAccessToken?: string } | undefined;
    const envs = await fetch(`${emu.url}/envs`, {
      headers: {
        "e2b-sandbox-id": sbx.sandboxId,
        ...(token?.envdAccessToken ? { "x-access-token": token.envdAccessToken } : { "x-access-token": (sbx as unknown as { envdAccessToken?: string }).envdAccessToken ?? "" }),
      },
    });
    expect(await envs.json()).toMatchObject({ FROM_CREATE: "yes" });
  });
});

describe("Novita's SDK on the same service", () => {
  it("files and commands in Novita's default workspace (its user's home)", async () => {
    const box = await novita.Sandbox.create("base", opts());
    try {
      await box.files.write("/home/user/paperclip-workspace/n.txt", "novita");
      expect((await box.commands.run("cat paperclip-workspace/n.txt; echo; whoami")).stdout).toBe("novita\nuser\n");
    } finally {
      await novita.Sandbox.kill(box.sandboxId, opts());
    }
  });
});

describe("refusals", () => {
  it("refused operations answer with the reason: forks (501), watchers (unimplemented)", async () => {
    const fork = await fetch(`${emu.url}/sandboxes/${sbx.sandboxId}/fork`, { method: "POST", headers: { "x-api-key": emu.credentials.apiKey!, "content-type": "application/json" }, body: "{}" });
    expect([fork.status, ((await fork.json()) as { message: string }).message]).toEqual([501, expect.stringMatching(/^emulator limit: no sandbox forks/)]);
    await expect(sbx.files.watchDir("/home/user", () => undefined)).rejects.toThrow(/watchers are not emulated|unimplemented/i);
    await emu.requests.idle();
    expect(emu.requests.unserved().map((u) => u.target)).toEqual(expect.arrayContaining(["/sandboxes/:sandboxID/fork"]));
  });
});

describe("PTY (the SDK's sandbox.pty)", () => {
  it("create, typed input echoed by the terminal, resize as SIGWINCH, kill: as the SDK drives envd", async () => {
    const decoder = new TextDecoder();
    let text = "";
    const until = async (marker: string) => {
      const deadline = Date.now() + 10_000;
      while (!text.includes(marker)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${marker} in ${JSON.stringify(text)}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    // The SDK runs `/bin/bash -i -l` on the terminal; we type into it as a user would.
    const term = await sbx.pty.create({ cols: 100, rows: 20, onData: (data: Uint8Array) => void (text += decoder.decode(data, { stream: true })) });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode("stty size; tty; trap 'echo winch $(stty size)' WINCH; echo typed-$((6*7))\r"));
    await until("typed-42");
    expect(text).toContain("20 100");
    expect(text).toMatch(/\/dev\/pts\/\d+/);
    // The terminal echoed what was typed (the command line itself), before its output.
    expect(text.indexOf("echo typed-$((6*7))")).toBeLessThan(text.indexOf("typed-42\r\n"));
    await sbx.pty.resize(term.pid, { cols: 132, rows: 43 });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode("echo after-resize\r"));
    await until("winch 43 132");
    await until("after-resize");
    // Input that is not a terminal's is refused as envd refuses it.
    await expect(sbx.commands.sendStdin(term.pid, "x")).rejects.toThrow(/stdin not enabled|not enabled or closed/);
    expect(await sbx.pty.kill(term.pid)).toBe(true);
    const end = await term.wait().catch((error: unknown) => error as { exitCode?: number });
    expect(end.exitCode).not.toBe(0);
  });
});

describe("coverage", () => {
  it("every operation of the SDKs' generated clients is classified, none is 'not yet', and the README's table is current", () => {
    const report = coverageReport(ENVD_COVERAGE, envdSdkOperations());
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
