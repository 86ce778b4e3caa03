// Login terminals on boxd's `Exec` with `tty` against the boxd emulator: the launcher sets the size
// boxd's ExecChunk cannot carry, a resize reaches the program as SIGWINCH with the new size, the
// exit code comes back (128 + n for a signal), and nothing of the terminal is left in the machine.
// The login flow itself is conformance's `login-pty-*` cases.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-boxd";
import { createBoxdApi, type BoxdApi } from "./api.js";
import { createTokenCache } from "./tokens.js";
import { boxdTerminals, createBoxdRunner, type BoxdTarget } from "./transport.js";

let emu: RunningEmulator;
let api: BoxdApi;
let target: BoxdTarget;
beforeAll(async () => {
  emu = await runEmulator(emulator, { options: {} });
  api = createBoxdApi({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url, exchangeUrl: emu.endpoints.exchange!, tokens: createTokenCache() });
  const machine = await api.createMachine({ name: "pc-terminal-test", labels: {} });
  target = { api, id: machine.id, agent: { legacy: false } };
}, 120_000);
afterAll(async () => {
  if (target) await api.destroyMachine(target.id).catch(() => undefined);
  api?.close();
  await emu?.close();
}, 60_000);

function open(script: string) {
  let text = "";
  const runner = createBoxdRunner(target);
  const opening = boxdTerminals(target, runner).open({ script, cols: 100, rows: 30, env: { TERM: "xterm-256color" }, onData: (bytes) => (text += bytes.toString("utf8")) });
  return { opening, output: () => text, runner };
}

describe("login terminals on Exec with tty", () => {
  it("gives the program a terminal of the asked size and delivers a resize as SIGWINCH with the new size", async () => {
    const t = open(`trap 'printf "winch %s\\n" "$(stty size)"; exit 7' WINCH; printf 'size %s\\n' "$(stty size)"; while :; do sleep 0.1; done`);
    const terminal = await t.opening;
    await vi.waitFor(() => expect(t.output()).toContain("size 30 100"), { timeout: 30_000 });
    await terminal.resize({ cols: 132, rows: 40 });
    expect(await terminal.exited).toEqual({ exitCode: 7, signal: null });
    expect(t.output()).toContain("winch 40 132");
    await terminal.close();
  }, 60_000);

  it("reports 128 + n for a program a signal ended, and leaves no launcher or control file", async () => {
    const t = open(`echo waiting; exec sleep 300`);
    const terminal = await t.opening;
    await vi.waitFor(() => expect(t.output()).toContain("waiting"), { timeout: 30_000 });
    await terminal.kill("SIGTERM");
    expect(await terminal.exited).toEqual({ exitCode: 143, signal: null });
    await terminal.close();
    let left = "";
    await t.runner.run(`ls -a "\${TMPDIR:-/tmp}" | grep -c '^\\.paperclip-pty\\.' || true`, { stdout: (chunk) => (left += chunk.toString()) });
    expect(left.trim()).toBe("0");
  }, 60_000);
});
