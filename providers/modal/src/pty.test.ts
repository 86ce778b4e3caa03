// The modal PTY transport (exec with `pty: true`) against the Modal emulator with the real SDK: what
// the program's terminal is and shows, resize and signals through the runner, close, the argv limit.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { PtyUnavailableError, TransportLimitError, type PtyProcess } from "@paperclip-sandbox/kit";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-modal";
import type { Sandbox } from "modal";
import { modalPty } from "./pty.js";
import { createModalRunner } from "./transport.js";

process.env.MODAL_CONFIG_PATH = "/nonexistent/modal.toml";
const modal = await import("modal");

let emu: RunningEmulator;
let client: InstanceType<typeof modal.ModalClient>;
let sandbox: Sandbox;
beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  process.env.MODAL_SERVER_URL = emu.url;
  client = new modal.ModalClient({ tokenId: emu.credentials.tokenId!, tokenSecret: emu.credentials.tokenSecret!, logLevel: "error" });
  const app = await client.apps.fromName("pty-test", { createIfMissing: true });
  sandbox = await client.sandboxes.create(app, client.images.fromRegistry("node:22"));
}, 60_000);
afterAll(async () => {
  await sandbox?.terminate().catch(() => undefined);
  client?.close();
  delete process.env.MODAL_SERVER_URL;
  await emu?.close();
}, 60_000);

const calls = { error: (_operation: string, error: unknown) => (error instanceof Error ? error : new Error(String(error))), retry: <T>(_operation: string, call: () => Promise<T>) => call() };

async function open(script: string, extra: { cols?: number; rows?: number; env?: Record<string, string>; cwd?: string } = {}): Promise<{ pty: PtyProcess; text: () => string }> {
  const chunks: Buffer[] = [];
  const pty = await modalPty(sandbox, createModalRunner(sandbox, calls), calls).open({
    script,
    cols: extra.cols ?? 80,
    rows: extra.rows ?? 24,
    ...(extra.env ? { env: extra.env } : {}),
    ...(extra.cwd ? { cwd: extra.cwd } : {}),
    onData: (bytes) => void chunks.push(Buffer.from(bytes)),
  });
  return { pty, text: () => Buffer.concat(chunks).toString("utf8") };
}

describe("modal login terminals (exec with pty)", () => {
  it("the terminal has the size asked for (not the SDK's fixed 80x24), the env and cwd, and shows only the program's bytes", async () => {
    const { pty, text } = await open(`[ -t 0 ] && stty size; pwd; echo "$PC_VAR $TERM"`, { cols: 132, rows: 43, env: { PC_VAR: "from-env", TERM: "xterm-256color" }, cwd: "/tmp" });
    expect(await pty.exited).toEqual({ exitCode: 0, signal: null });
    expect(text()).toBe("43 132\r\n/tmp\r\nfrom-env xterm-256color\r\n");
    await pty.close();
  });

  it("a resize is seen by the running program; SIGINT reaches its process group through the runner", async () => {
    const { pty, text } = await open(`trap 'echo interrupted; exit 5' INT; echo ready; IFS= read -r _; stty size; while :; do sleep 1; done`);
    await vi.waitFor(() => expect(text()).toContain("ready"), { timeout: 20_000 });
    await pty.resize({ cols: 100, rows: 30 });
    await pty.write(Buffer.from("\r"));
    await vi.waitFor(() => expect(text()).toContain("30 100\r\n"), { timeout: 20_000 });
    await pty.kill("SIGINT");
    expect(await pty.exited).toEqual({ exitCode: 5, signal: null });
    expect(text()).toContain("interrupted");
    await pty.close();
  });

  it("close ends a program that ignores the hang-up (SIGKILL to its group)", async () => {
    const { pty, text } = await open(`trap '' HUP TERM; echo ready; while :; do sleep 1; done`);
    await vi.waitFor(() => expect(text()).toContain("ready"), { timeout: 20_000 });
    await pty.close();
    expect(await pty.exited).toEqual({ exitCode: 137, signal: null });
  });

  it("refuses a command over Modal's argv limit, and an aborted open, before any call", async () => {
    const mark = emu.requests.mark();
    const transport = modalPty(sandbox, createModalRunner(sandbox, calls), calls);
    await expect(transport.open({ script: `echo ${"x".repeat(70 * 1024)}`, cols: 80, rows: 24, onData: () => undefined })).rejects.toBeInstanceOf(TransportLimitError);
    await expect(transport.open({ script: "true", cols: 80, rows: 24, onData: () => undefined, signal: AbortSignal.abort() })).rejects.toBeInstanceOf(PtyUnavailableError);
    await emu.requests.idle();
    expect(emu.requests.list({ since: mark })).toEqual([]);
  });
});
