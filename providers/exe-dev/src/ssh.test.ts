// The SSH side of the exe-dev provider against the emulator's real OpenSSH servers: one connection
// per lease, host keys checked, a dropped connection reported and re-established, timeouts ending
// the remote process group, and secrets kept off every command line.
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMAND_CHANNEL_SWITCH } from "@paperclip-sandbox/kit";
import { startHarness, type Harness } from "./__fixtures__/harness.js";

let h: Harness;
const switchBefore = process.env[COMMAND_CHANNEL_SWITCH];
beforeAll(async () => {
  // Every command an SSH channel of its own: what this file tests (the command channel has command-channel.test.ts).
  process.env[COMMAND_CHANNEL_SWITCH] = "off";
  h = await startHarness();
}, 60_000);
afterAll(async () => {
  if (switchBefore === undefined) delete process.env[COMMAND_CHANNEL_SWITCH];
  else process.env[COMMAND_CHANNEL_SWITCH] = switchBefore;
  await h?.close();
}, 60_000);

const vmOf = (lease: { providerLeaseId: string | null }) => h.emu.control.sshHost(lease.providerLeaseId!)!;
const sessions = (vm: string, since: number) => h.emu.requests.list({ since, protocol: "ssh", method: "EXEC", includeRunning: true }).filter((r) => r.path === vm).length;

/** Every process command line on this host (the local ssh clients and, as root, the jails' processes). */
async function commandLines(): Promise<string[]> {
  const lines: string[] = [];
  for (const pid of (await readdir("/proc")).filter((entry) => /^\d+$/.test(entry))) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline) lines.push(cmdline.replace(/\0/g, " "));
  }
  return lines;
}

describe("one multiplexed connection per lease", () => {
  it("runs every command of a lease as a channel on one TCP connection", async () => {
    const lease = await h.acquire();
    try {
      const host = vmOf(lease);
      const before = h.emu.requests.mark();
      for (let i = 0; i < 5; i++) expect((await h.sh(lease, `echo ${i}`)).stdout).toBe(`${i}\n`);
      // Five executes, five sessions, still the one connection acquire opened.
      expect(sessions(lease.providerLeaseId!, before)).toBe(5);
      expect(host.connections).toBe(1);
    } finally {
      await h.release(lease);
    }
  }, 60_000);

  it("keeps environment values and the key off every command line, local and remote", async () => {
    const secret = `s3cret-${Date.now()}`;
    const lease = await h.acquire();
    try {
      const running = h.sh(lease, "sleep 2; echo done", { env: { PAPERCLIP_API_KEY: secret } });
      await new Promise((resolve) => setTimeout(resolve, 700));
      const seen = await commandLines();
      expect(seen.filter((line) => line.includes(secret))).toEqual([]);
      expect(seen.filter((line) => line.includes("PRIVATE KEY"))).toEqual([]);
      expect((await running).stdout).toBe("done\n");
      expect((await h.sh(lease, 'printf %s "$PAPERCLIP_API_KEY"', { env: { PAPERCLIP_API_KEY: secret } })).stdout).toBe(secret);
    } finally {
      await h.release(lease);
    }
  }, 60_000);

  it("keeps the key in a 0600 file in a private directory, removed with the lease", async () => {
    const lease = await h.acquire();
    const base = join(h.runtimeParent, `paperclip-exe-dev-${process.getuid!()}`);
    const dirs = (await readdir(base)).filter((name) => name.startsWith("pcssh-"));
    expect(dirs).toHaveLength(1);
    expect((await stat(join(base, dirs[0]!))).mode & 0o777).toBe(0o700);
    expect((await stat(join(base, dirs[0]!, "id"))).mode & 0o777).toBe(0o600);
    expect(await readFile(join(base, dirs[0]!, "id"), "utf8")).toBe(h.emu.credentials.sshPrivateKey);
    await h.release(lease);
    expect((await readdir(base)).filter((name) => name.startsWith("pcssh-"))).toEqual([]);
  }, 60_000);
});

describe("host keys", () => {
  it("records the VM's key at creation and refuses a changed one, running nothing", async () => {
    const lease = await h.acquire();
    try {
      expect(lease.metadata?.vmHostKeys).toEqual([expect.stringMatching(/^\[127\.0\.0\.1\]:\d+ ssh-ed25519 AAAA/)]);
      const host = vmOf(lease);
      await host.rotateHostKey();
      // The next connection meets the new key: drop the current one so the provider must reconnect.
      host.dropConnections();
      // The command in flight when the master notices may still meet the old connection.
      const first = await h.sh(lease, "echo first").then(
        () => "ran",
        (error: Error) => error.message,
      );
      expect(first).toMatch(/connection was lost|host key differs/);
      const before = h.emu.requests.mark();
      await expect(h.sh(lease, "touch /tmp/should-not-run")).rejects.toThrow(/SSH host key differs from the one recorded .* nothing was sent/);
      expect(sessions(lease.providerLeaseId!, before)).toBe(0);
    } finally {
      await h.destroy(lease);
    }
  }, 60_000);

  it("accepts only pinned keys when host keys are pinned", async () => {
    const pinned = "[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVuay5ub3QudGhlLnJpZ2h0LmtleS4uLi4uLi4u";
    await expect(h.acquire({ sshKnownHosts: pinned })).rejects.toThrow(/matches none of the pinned host keys/);
    expect(await h.emu.leftovers()).toEqual([]);
  }, 60_000);
});

describe("failures of the connection", () => {
  it("reports a connection dropped mid-command as a transport failure and connects again for the next command", async () => {
    const lease = await h.acquire();
    try {
      const host = vmOf(lease);
      const running = h.sh(lease, "echo started; sleep 5; echo finished");
      await new Promise((resolve) => setTimeout(resolve, 800));
      expect(host.dropConnections()).toBe(1);
      const lost = await running.then(
        () => undefined,
        (error: Error) => error.message,
      );
      expect(lost).toMatch(/exe\.dev VM .*: the SSH connection was lost; the command.s outcome is unknown/);
      const next = await h.sh(lease, "echo again");
      expect([next.exitCode, next.stdout]).toEqual([0, "again\n"]);
      expect(host.connections).toBe(2);
    } finally {
      await h.release(lease);
    }
  }, 60_000);

  it("ends the whole remote process group at a timeout (sshd itself would leave it running)", async () => {
    const lease = await h.acquire();
    try {
      const pids = `${lease.metadata!.remoteCwd}/group.pids`;
      const result = await h.sh(lease, `sleep 300 & echo $! > ${pids}; sleep 300 & echo $! >> ${pids}; echo $$ >> ${pids}; wait`, { timeoutMs: 1_000 });
      expect(result.timedOut).toBe(true);
      const alive = await h.sh(lease, `for p in $(cat ${pids}); do kill -0 "$p" 2>/dev/null && echo "$p alive"; done; true`);
      expect(alive.stdout).toBe("");
    } finally {
      await h.release(lease);
    }
  }, 60_000);
});

describe("lifecycle", () => {
  it("keeps a reusable lease's VM at release (found again by its tags) and deletes a plain one before the receipt", async () => {
    const kept = await h.acquire({ reuseLease: true }, { agentId: "agent-1", executionWorkspaceId: "ws-1" });
    const receipt = await h.release(kept, { reuseLease: true });
    expect(receipt).toEqual({ providerLeaseId: kept.providerLeaseId, state: "stopped" });
    expect(h.emu.control.vmNames()).toContain(kept.providerLeaseId);
    const resumed = await h.resume(kept, { reuseLease: true });
    expect(resumed.providerLeaseId).toBe(kept.providerLeaseId);
    expect((await h.sh(resumed, "echo back")).stdout).toBe("back\n");
    await h.destroy(resumed, { reuseLease: true });
    expect(h.emu.control.vmNames()).not.toContain(kept.providerLeaseId);
  }, 60_000);

  it("closes a connection left idle (a kept lease's), key file included, and opens a new one for the next command", async () => {
    const idle = await startHarness({}, { idleCloseMs: 300 });
    try {
      const lease = await idle.acquire({ reuseLease: true }, { agentId: "agent-1", executionWorkspaceId: "ws-1" });
      await idle.release(lease, { reuseLease: true });
      const host = idle.emu.control.sshHost(lease.providerLeaseId!)!;
      const base = join(idle.runtimeParent, `paperclip-exe-dev-${process.getuid!()}`);
      await waitFor("the idle connection to close", async () => host.liveConnections === 0 && (await readdir(base)).every((name) => !name.startsWith("pcssh-")));
      const resumed = await idle.resume(lease, { reuseLease: true });
      expect((await idle.sh(resumed, "echo again")).stdout).toBe("again\n");
      // (Under load a pause between the resume's sentinel check and this command may close one more.)
      expect(host.connections).toBeGreaterThanOrEqual(2);
      await idle.destroy(resumed, { reuseLease: true });
    } finally {
      await idle.close();
    }
  }, 60_000);

  it("answers release with the receipt only once exe.dev no longer lists the VM", async () => {
    const slow = await startHarnessWith({ deleteLingerMs: 600 });
    try {
      const lease = await slow.acquire();
      const mark = slow.emu.requests.mark();
      const started = Date.now();
      expect(await slow.release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
      expect(Date.now() - started).toBeGreaterThanOrEqual(600);
      const calls = await slow.calls(mark);
      expect(calls[0]).toBe("rm 200");
      expect(calls.filter((call) => call === "ls 200").length).toBeGreaterThanOrEqual(2);
      expect(slow.emu.control.vmNames()).toEqual([]);
    } finally {
      await slow.close();
    }
  }, 60_000);
});

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function startHarnessWith(options: Parameters<typeof startHarness>[0]) {
  return startHarness(options);
}
