import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { assert, expectOk } from "../expect.js";
import { ConformanceSkip } from "../skip.js";
import type { AcquiredLease, ConformanceWorld } from "../world.js";

const LEASE_METHODS = ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute"];
import { COMMAND_CHANNEL_SWITCH_VARIABLE as SWITCH } from "../channel-switch.js";
/**
 * Prints `channel` when the command runs over the kit's multiplexer (its parent is the in-sandbox
 * `node -e <mux>`, whose source names itself `paperclip-channel`), `exec` when it is a vendor exec.
 * The name is split in the script: a vendor exec's parent shell has the script in its own argv.
 */
const WHERE = `grep -q "paperclip-chan""nel" /proc/$PPID/cmdline 2>/dev/null && echo channel || echo exec`;
/** Generous: a channel restarts after a backoff of its own, on a loaded machine. */
const COMES_BACK_MS = 60_000;

/** Runs only where the provider's worker runs every command over the channel (`always`). */
function requireChannel(world: ConformanceWorld): void {
  requireMethods(world, LEASE_METHODS);
  if (world.options.workerEnv?.[SWITCH] !== "always") throw new ConformanceSkip(`the worker does not run every command over the command channel (${SWITCH}=always)`);
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = COMES_BACK_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new assert.AssertionError({ message: `command channel: ${what} (waited ${timeoutMs} ms)` });
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Waits until the lease's commands run over its channel (it starts beside the lease's first command). */
async function overChannel(world: ConformanceWorld, lease: AcquiredLease): Promise<void> {
  await until(async () => (await world.sh(lease, WHERE)).stdout === "channel\n", "the lease's commands never ran over the channel");
}

/** Faults of the kit's command channel (`withCommandChannel`), made for real in the sandbox and on its stream. */
export const commandChannelCases: ConformanceCase[] = [
  {
    name: "command-channel-multiplexer-killed",
    async run(world) {
      requireChannel(world);
      await world.withLease(async (lease) => {
        await overChannel(world, lease);
        const victim = world.sh(lease, "echo $$ > victim.pid; sleep 60");
        victim.catch(() => undefined);
        await until(async () => /^\d+\n$/.test((await world.sh(lease, "cat victim.pid 2>/dev/null")).stdout), "the victim never wrote its pid", 20_000);
        const pid = (await world.sh(lease, "cat victim.pid")).stdout.trim();
        // The killer runs over the channel too: its parent is the multiplexer.
        await assert.rejects(world.sh(lease, "kill -9 $PPID"), /command channel broke/, "the command that killed the multiplexer");
        await assert.rejects(victim, /command channel broke/, "a command in flight when the multiplexer died");
        assert.equal((await world.sh(lease, `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout, "gone\n", "the lost command's process group still runs");
        // It comes back on a later command (after its restart delay), not on its own.
        await overChannel(world, lease);
        assert.equal((await world.sh(lease, "echo over")).stdout, "over\n");
      });
    },
  },
  {
    name: "command-channel-cut-before-hello",
    async run(world) {
      requireChannel(world);
      const cut = world.options.commandChannel?.cutBeforeHello;
      if (!cut) throw new ConformanceSkip("no commandChannel.cutBeforeHello hook for this provider");
      // The lease's first stream is its channel's (the acquire's workspace command waits for it).
      const cuts = await cut();
      await world.withLease(async (lease) => {
        assert.equal(cuts(), 1, "the channel's stream was not cut");
        const once = await world.sh(lease, "echo once >> ran.log; cat ran.log");
        expectOk(once, "a command after the cut");
        assert.equal(once.stdout, "once\n");
        await overChannel(world, lease);
        assert.equal((await world.sh(lease, "cat ran.log")).stdout, "once\n", "a command ran twice");
      });
    },
  },
  {
    name: "command-channel-steady-command-no-vendor-call",
    async run(world) {
      requireChannel(world);
      const count = world.options.commandChannel?.vendorCalls;
      if (!count) throw new ConformanceSkip("no commandChannel.vendorCalls hook for this provider");
      await world.withLease(async (lease) => {
        await overChannel(world, lease);
        const since = count();
        const outs: string[] = [];
        for (const word of ["one", "two", "three"]) outs.push((await world.sh(lease, `echo ${word}; cat`, { stdin: word })).stdout);
        assert.deepEqual(outs, ["one\none", "two\ntwo", "three\nthree"]);
        assert.deepEqual(await since(), [], "vendor calls made by commands on a ready channel");
      });
    },
  },
  {
    name: "command-channel-flood-holds-no-other",
    async run(world) {
      requireChannel(world);
      await world.withLease(async (lease) => {
        await overChannel(world, lease);
        const flood = world.sh(lease, "head -c 8388608 /dev/zero | tr '\\0' a; echo");
        const quick = await Promise.all([1, 2, 3].map((i) => world.sh(lease, `echo quick${i}; ${WHERE}`)));
        assert.deepEqual(
          quick.map((q) => q.stdout),
          [1, 2, 3].map((i) => `quick${i}\nchannel\n`),
        );
        const big = await flood;
        expectOk(big, "the flooding command");
        assert.equal(big.stdout.length, 8 * 1024 * 1024 + 1, "bytes lost from a flooding command");
      });
    },
  },
];
