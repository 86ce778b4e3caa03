import { randomBytes, randomUUID } from "node:crypto";
import type { DuplexChannelHandle } from "@paperclip-sandbox/worker-client";
import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { assert, expectOk, shellQuote } from "../expect.js";
import { ConformanceSkip } from "../skip.js";
import type { AcquiredLease, ConformanceWorld } from "../world.js";

const DUPLEX_METHODS = ["duplexChannelOpen", "duplexChannelWrite", "duplexChannelStop", "duplexChannelClose"];

/** What one channel delivered, as the host's route sees it. */
class Route {
  bytes = Buffer.alloc(0);
  exit: { exitCode: number | null; transportClosed: boolean } | null = null;
  readonly listener = {
    onData: (chunk: Buffer) => {
      this.bytes = Buffer.concat([this.bytes, chunk]);
    },
    onExit: (exit: { exitCode: number | null; transportClosed: boolean }) => {
      this.exit = exit;
    },
  };

  async until(cond: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > deadline) {
        throw new assert.AssertionError({ message: `duplex channel: timed out waiting for ${what} (got ${this.bytes.length} bytes, exit ${JSON.stringify(this.exit)})` });
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

async function openChannel(world: ConformanceWorld, lease: AcquiredLease, command: string[]): Promise<{ route: Route; channel: DuplexChannelHandle }> {
  const route = new Route();
  const hostRouteId = `route-${randomUUID()}`;
  const channel = await world.client.duplex.open(
    {
      hostRouteId,
      driverKey: world.options.driverKey,
      companyId: world.identity.companyId,
      environmentId: world.identity.environmentId,
      providerLeaseId: lease.providerLeaseId,
      command,
    },
    route.listener,
  );
  assert.equal(channel.hostRouteId, hostRouteId, "the open reply must echo the host route id");
  assert.ok(typeof channel.workerSessionId === "string" && channel.workerSessionId.length > 0, "the open reply must carry a workerSessionId");
  return { route, channel };
}

export const duplexCases: ConformanceCase[] = [
  {
    // The host's experimental HTTP/2 callback bridge: one channel runs the bridge gateway in the
    // sandbox and carries raw HTTP/2 bytes both ways; the agent, started by a later execute, talks
    // to that gateway on the sandbox's loopback. So the channel must be binary-clean, ordered, in
    // the same sandbox as executes, and end when stopped or when its lease goes.
    name: "duplex-channel",
    run: (world) => {
      requireMethods(world, ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute", ...DUPLEX_METHODS]);
      if (world.driver?.sandboxCapabilities?.duplexCommandStream !== true) {
        throw new ConformanceSkip("the driver does not declare sandboxCapabilities.duplexCommandStream");
      }
      return world.withLease(async (lease) => {
        const pidFile = `${lease.remoteCwd}/duplex-${randomUUID().slice(0, 8)}.pid`;
        // The path travels as its own argv element: the provider must quote it, never re-parse it.
        const { route, channel } = await openChannel(world, lease, ["sh", "-c", `echo "$$" > "$1"; printf 'ready\\n'; printf 'to stderr\\n' >&2; exec cat`, "duplex-conformance", pidFile]);
        await route.until(() => route.bytes.toString("latin1").startsWith("ready\n"), "the ready line");

        const payload = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(1024 * 1024)]);
        for (let offset = 0; offset < payload.length; offset += 64 * 1024) {
          await channel.write(payload.subarray(offset, offset + 64 * 1024));
        }
        const expected = Buffer.concat([Buffer.from("ready\n"), payload]);
        await route.until(() => route.bytes.length >= expected.length, "the echo of 1 MiB");
        assert.ok(route.bytes.equals(expected), "the channel changed, reordered or mixed stderr into the bytes");

        // Same sandbox as executes: the channel's process is visible there, and so are its files.
        const pid = await world.sh(lease, `cat ${shellQuote(pidFile)}`);
        expectOk(pid, "read the channel's pid file from an execute");
        const channelPid = pid.stdout.trim();
        assert.match(channelPid, /^\d+$/, `pid file content: ${JSON.stringify(pid.stdout)}`);
        expectOk(await world.sh(lease, `kill -0 ${channelPid}`), "the channel's process is alive and visible to executes");

        await channel.stop();
        await route.until(() => route.exit !== null, "the exit notification after stop");
        assert.equal(route.exit!.transportClosed, false, "a stopped command is a process exit, not a transport loss");
        const gone = await world.sh(lease, `kill -0 ${channelPid} 2>/dev/null && echo alive || echo gone`);
        assert.equal(gone.stdout.trim(), "gone", "the channel's process survived stop");
        const closed = await channel.close();
        assert.equal(closed.hostRouteId, channel.hostRouteId, "close must echo the host route id");
        await assert.rejects(channel.write(Buffer.from("late")), "a write to a closed channel must be refused");

        // A channel still open at a plain release (no cancelActiveWork) ends with the lease, and the
        // release does not hang on it: the provider ends the channel itself rather than letting the
        // sandbox's teardown cut it off (which would be reported as a transport loss).
        const second = await openChannel(world, lease, ["cat"]);
        await second.channel.write(Buffer.from("ping"));
        await second.route.until(() => second.route.bytes.toString() === "ping", "the second channel's echo");
        const released = world.release(lease).then(() => "released");
        const outcome = await Promise.race([released, new Promise((resolve) => setTimeout(() => resolve("hung"), 15_000))]);
        assert.equal(outcome, "released", "release waited on the open duplex channel");
        await second.route.until(() => second.route.exit !== null, "the exit notification after the lease was released");
        assert.equal(second.route.exit!.transportClosed, false, "release cut the channel off instead of ending it");
        await second.channel.close();
      });
    },
  },
];
