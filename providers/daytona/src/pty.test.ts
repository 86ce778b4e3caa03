// The daytona PTY transport (the toolbox's PTY sessions) against the Daytona emulator: what the
// program's terminal shows, signals, resize and the daemon's size bound.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Daytona, type Sandbox } from "@daytonaio/sdk";
import { PtyUnavailableError, type PtyProcess } from "@paperclip-sandbox/kit";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-daytona";
import { createDaytonaClient, type DaytonaClient } from "./client.js";
import { daytonaConfig } from "./config.js";
import { daytonaFiles, daytonaRunner } from "./exec.js";
import { daytonaPty } from "./pty.js";
import { handleOf } from "./sandboxes.js";

let emu: RunningEmulator;
let client: DaytonaClient;
let sandbox: Sandbox;
beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  client = createDaytonaClient(daytonaConfig.parse({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url }), { env: {} });
  sandbox = await new Daytona({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url, useDeprecatedPolling: true }).create({ autoStopInterval: 0 });
}, 60_000);
afterAll(async () => {
  await sandbox?.delete(60, true).catch(() => undefined);
  await emu?.close();
}, 60_000);

function transport() {
  const handle = handleOf(sandbox);
  return daytonaPty(client, handle, daytonaRunner(client, handle, daytonaFiles(client, handle)));
}

async function open(script: string, size = { cols: 80, rows: 24 }): Promise<{ pty: PtyProcess; text: () => string }> {
  const chunks: Buffer[] = [];
  const pty = await transport().open({ script, ...size, env: { TERM: "xterm-256color" }, onData: (bytes) => void chunks.push(Buffer.from(bytes)) });
  return { pty, text: () => Buffer.concat(chunks).toString("utf8") };
}

describe("daytona login terminals (toolbox PTY sessions)", () => {
  it("shows only the program's terminal: the shell's prompt, its profile and the typed exec line never reach the caller", async () => {
    const { pty, text } = await open(`printf 'carrier=%s first\\n' "\${PAPERCLIP_PTY-unset}"; IFS= read -r x; printf 'got[%s]\\n' "$x"`);
    await vi.waitFor(() => expect(text()).toContain("first"), { timeout: 20_000 });
    await pty.write(Buffer.from("abc\r"));
    expect(await pty.exited).toEqual({ exitCode: 0, signal: null });
    // The terminal's own echo of the typed input, then the program's answer; nothing before the program's first byte.
    expect(text()).toBe("carrier=unset first\r\nabc\r\ngot[abc]\r\n");
    await pty.close();
    await emu.requests.idle();
    expect(await emu.leftovers()).not.toContainEqual(expect.stringContaining("pty session"));
  });

  it("signals reach the program's process group (SIGINT through the runner, not the PTY API's kill)", async () => {
    const { pty, text } = await open(`trap 'echo interrupted; exit 5' INT; echo ready; while :; do sleep 1; done`);
    await vi.waitFor(() => expect(text()).toContain("ready"), { timeout: 20_000 });
    await pty.kill("SIGINT");
    expect(await pty.exited).toEqual({ exitCode: 5, signal: null });
    expect(text()).toContain("interrupted");
    await pty.close();
  });

  it("a resized terminal reports its new size to the program", async () => {
    const { pty, text } = await open(`echo ready; IFS= read -r _; stty size`);
    await vi.waitFor(() => expect(text()).toContain("ready"), { timeout: 20_000 });
    await pty.resize({ cols: 132, rows: 43 });
    await pty.write(Buffer.from("\r"));
    expect(await pty.exited).toEqual({ exitCode: 0, signal: null });
    expect(text()).toMatch(/43 132\r\n$/);
  });

  it("close ends a program that ignores the hang-up (the session is deleted: SIGKILL) and leaves nothing", async () => {
    const { pty, text } = await open(`trap '' HUP TERM; echo ready; while :; do sleep 1; done`);
    await vi.waitFor(() => expect(text()).toContain("ready"), { timeout: 20_000 });
    await pty.close();
    expect(await pty.exited).toEqual({ exitCode: 137, signal: null });
    await emu.requests.idle();
    expect(await emu.leftovers()).not.toContainEqual(expect.stringContaining("pty session"));
  });

  it("refuses sizes the daemon refuses (at most 999) before any call, naming the bound", async () => {
    const mark = emu.requests.mark();
    await expect(transport().open({ script: "true", cols: 1000, rows: 24, onData: () => undefined })).rejects.toThrow(/at most 999 columns and rows \(got 1000x24\)/);
    await expect(transport().open({ script: "true", cols: 80, rows: 24, onData: () => undefined, signal: AbortSignal.abort() })).rejects.toBeInstanceOf(PtyUnavailableError);
    await emu.requests.idle();
    expect(emu.requests.list({ since: mark })).toEqual([]);
  });
});
