// The kit's `ssh -tt` terminals against a VM's real sshd (the emulator's, which permits a PTY as
// exe.dev does): the size the open asks for, a resize reaching the program as SIGWINCH, its exit
// code (128 + n when a signal ended it), and no control file left in the VM. The login flow itself
// (prompt, echo, ^C, stop, close, release) is the conformance suite's `login-pty-*` cases.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createOpenSshSession, type OpenSshSession, type PtyExit } from "@paperclip-sandbox/kit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startHarness, type Harness } from "./__fixtures__/harness.js";

let h: Harness;
let lease: Awaited<ReturnType<Harness["acquire"]>>;
let session: OpenSshSession;
let dir: string;
beforeAll(async () => {
  h = await startHarness();
  lease = await h.acquire();
  dir = await mkdtemp(join(tmpdir(), "exe-pty-"));
  const meta = lease.metadata as { vmSshHost: string; vmSshPort: number; vmSshUser?: string };
  session = await createOpenSshSession({
    name: "test VM",
    destination: { host: meta.vmSshHost, port: meta.vmSshPort, user: meta.vmSshUser },
    identity: { privateKey: h.config.sshPrivateKey as string },
    hostKeys: { mode: "accept-new", knownHostsFile: join(dir, "known_hosts") },
    runtimeDir: dir,
  });
}, 120_000);
afterAll(async () => {
  await session?.close();
  if (lease) await h.release(lease);
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

function terminalOf(script: string, size = { cols: 100, rows: 30 }) {
  let text = "";
  const opening = session.pty.open({ script, ...size, env: { TERM: "xterm-256color" }, onData: (bytes) => (text += bytes.toString("utf8")) });
  return { opening, output: () => text };
}

describe("terminals over ssh -tt", () => {
  it("gives the program a terminal of the asked size and delivers a resize as SIGWINCH with the new size", async () => {
    const t = terminalOf(`trap 'printf "winch %s\\n" "$(stty size)"; exit 7' WINCH; printf 'size %s term %s\\n' "$(stty size)" "$TERM"; while :; do sleep 0.1; done`);
    const terminal = await t.opening;
    await vi.waitFor(() => expect(t.output()).toContain("size 30 100 term xterm-256color"), { timeout: 30_000 });
    await terminal.resize({ cols: 132, rows: 40 });
    const exit: PtyExit = await terminal.exited;
    expect(t.output()).toContain("winch 40 132");
    expect(exit).toEqual({ exitCode: 7, signal: null });
    await terminal.close();
  }, 60_000);

  it("reports 128 + n for a program a signal ended, and leaves no control file in the VM", async () => {
    const t = terminalOf(`echo waiting; exec sleep 300`);
    const terminal = await t.opening;
    await vi.waitFor(() => expect(t.output()).toContain("waiting"), { timeout: 30_000 });
    await terminal.kill("SIGTERM");
    expect(await terminal.exited).toEqual({ exitCode: 143, signal: null });
    await terminal.close();
    const left = await h.sh(lease, `ls -a "\${TMPDIR:-/tmp}" | grep -c '^\\.paperclip-pty\\.' || true`);
    expect(left.stdout.trim()).toBe("0");
  }, 60_000);
});
