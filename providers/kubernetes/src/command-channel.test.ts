// The kit's command channel in kubernetes pods (the in-repo API test server, client-node, in
// process): the in-sandbox multiplexer killed mid-command, as an agent or the OOM killer would.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { commandChannelStatus } from "@paperclip-sandbox/kit";
import { useCommandChannelSwitch } from "@paperclip-sandbox/conformance";
import { acquire, startPlugin, startTestCluster, type TestCluster } from "./__fixtures__/cluster.js";

let test: TestCluster;
useCommandChannelSwitch();
beforeAll(async () => {
  test = await startTestCluster();
});
afterAll(async () => {
  await test?.close();
});

describe("kubernetes: the command channel under faults", () => {
  it("the multiplexer killed mid-command: that command fails as lost with its group ended; the next runs; the channel comes back", async () => {
    const { hooks } = await startPlugin();
    const { lease, exec, release } = await acquire(hooks, test.config);
    const sh = (script: string) => exec("sh", ["-c", script], { cwd: lease.metadata?.remoteCwd, timeoutMs: 60_000 });
    const ready = () => vi.waitFor(() => expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready"), { timeout: 30_000, interval: 50 });
    try {
      expect((await sh("true")).exitCode).toBe(0); // the lease's first command starts the channel
      await ready();
      const victim = sh("echo $$ > victim.pid; sleep 60");
      await vi.waitFor(async () => expect((await sh("cat victim.pid 2>/dev/null")).stdout).toMatch(/^\d+\n$/), { timeout: 20_000, interval: 100 });
      const pid = (await sh("cat victim.pid")).stdout.trim();
      await expect(sh("kill -9 $PPID")).rejects.toThrow(/command channel broke/);
      await expect(victim).rejects.toThrow(/command channel broke/);
      expect((await sh(`kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout).toBe("gone\n");
      // It comes back on a later command (after its restart delay), not on its own.
      await vi.waitFor(
        async () => {
          expect((await sh("true")).exitCode).toBe(0);
          expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready");
        },
        { timeout: 30_000, interval: 200 },
      );
      expect(commandChannelStatus(lease.providerLeaseId!)).toMatchObject({ breaks: 1 });
      expect((await sh("echo over")).stdout).toBe("over\n");
    } finally {
      await release();
    }
  });
});
