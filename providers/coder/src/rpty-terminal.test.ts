// Login terminals on the agent's reconnecting PTY against the Coder emulator: the size asked for
// (the width/height query), a resize as the protocol's {height, width} frame reaching the program
// as SIGWINCH, the exit status the agent does not report read back from the workspace (128 + n for
// a signal), and nothing of the terminal left behind. The login flow itself is conformance's
// `login-pty-*` cases.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { startCoderEmulator, type CoderWorld } from "./__fixtures__/emulator.js";
import { harness } from "./__fixtures__/harness.js";
import { rptyRunner, rptyTerminals, type PtyTarget } from "./transports/rpty.js";

let world: CoderWorld;
let h: ReturnType<typeof harness>;
let lease: PluginEnvironmentLease;
let target: PtyTarget;
beforeAll(async () => {
  world = await startCoderEmulator();
  h = harness(world.config);
  lease = await h.acquire();
  const workspace = (await (await fetch(`${world.emu.url}/api/v2/workspaces/${lease.metadata!.coderWorkspaceId as string}`, { headers: { "coder-session-token": world.token } })).json()) as {
    latest_build: { resources: Array<{ agents: Array<{ id: string }> }> };
  };
  target = { coderUrl: world.emu.url, token: world.token, agentId: workspace.latest_build.resources[0]!.agents[0]!.id };
}, 120_000);
afterAll(async () => {
  if (lease) await h.release(lease);
  await world?.emu.close();
}, 60_000);

function open(script: string) {
  let text = "";
  const terminals = rptyTerminals(target, rptyRunner(target, {}));
  const opening = terminals.open({ script, cols: 100, rows: 30, env: { TERM: "xterm-256color" }, onData: (bytes) => (text += bytes.toString("utf8")) });
  return { opening, output: () => text };
}

describe("login terminals on the reconnecting PTY", () => {
  it("opens at the asked size, resizes by a {height, width} frame, and reports the exit status the agent does not", async () => {
    const t = open(`trap 'printf "winch %s\\n" "$(stty size)"; exit 7' WINCH; printf 'size %s\\n' "$(stty size)"; while :; do sleep 0.1; done`);
    const terminal = await t.opening;
    await vi.waitFor(() => expect(t.output()).toContain("size 30 100"), { timeout: 30_000 });
    await terminal.resize({ cols: 132, rows: 40 });
    expect(await terminal.exited).toEqual({ exitCode: 7, signal: null });
    expect(t.output()).toContain("winch 40 132");
    await terminal.close();
  }, 60_000);

  it("reports 128 + n for a program a signal ended, and leaves no launcher, control or status file", async () => {
    const t = open(`echo waiting; exec sleep 300`);
    const terminal = await t.opening;
    await vi.waitFor(() => expect(t.output()).toContain("waiting"), { timeout: 30_000 });
    await terminal.kill("SIGTERM");
    expect(await terminal.exited).toEqual({ exitCode: 143, signal: null });
    await terminal.close();
    const left = await h.sh(lease, `ls -a "\${TMPDIR:-/tmp}" | grep -c '^\\.paperclip-pty\\.' || true`);
    expect(left.stdout.trim()).toBe("0");
  }, 60_000);
});
