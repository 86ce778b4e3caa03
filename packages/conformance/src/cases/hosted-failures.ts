import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { assert, expectOk } from "../expect.js";
import { ConformanceSkip } from "../skip.js";
import type { AcquiredLease } from "../world.js";

const LEASE_METHODS = ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute"];
const SYNC_METHODS = [...LEASE_METHODS, "environmentSyncIn", "environmentSyncOut"];

/** What hosted providers get wrong: restarts, half-made sandboxes, deadlines, labels, transient errors. */
export const hostedFailureCases: ConformanceCase[] = [
  {
    name: "background-child-holding-stdout",
    async run(world) {
      requireMethods(world, LEASE_METHODS);
      await world.withLease(async (lease) => {
        // The child inherits stdout and keeps it open until this case lets it go, after the result:
        // a provider that waits for stdout to close would wait until the command's timeout (no
        // real-clock bound here; however slow the machine, the result can only come back first).
        const release = `.bg-release-${process.pid}-${Date.now()}`;
        const result = await world.sh(lease, `(while [ ! -e ${release} ]; do sleep 0.1; done) & echo done`, { timeoutMs: 20_000 });
        expectOk(result, "a command leaving a child on its stdout (it waited for the child until its timeout)");
        assert.equal(result.stdout, "done\n");
        expectOk(await world.sh(lease, `touch ${release}`), "letting the background child go");
      });
    },
  },
  {
    name: "sync-all-byte-values-roundtrip",
    async run(world) {
      requireMethods(world, SYNC_METHODS);
      const local = await mkdtemp(path.join(world.hostDir, "bytes-"));
      const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      await writeFile(path.join(local, "every-byte.bin"), every);
      await writeFile(path.join(local, "reversed.bin"), Buffer.from(every).reverse());
      await writeFile(path.join(local, "nul-and-high.bin"), Buffer.from([0x00, 0xff, 0x80, 0x0a, 0xc8, 0x0d, 0x00]));
      await world.withLease(async (lease) => {
        const remote = `${lease.remoteCwd}/bytes-tree`;
        await world.client.env.syncIn({
          ...world.base(lease.config),
          lease: lease.lease,
          operations: [{ operationId: "bytes-in", files: [{ sourcePath: local, targetPath: remote, kind: "directory" }] }],
        });
        const check = await world.sh(lease, `od -An -tx1 -v bytes-tree/nul-and-high.bin | tr -d ' \\n'; echo; wc -c < bytes-tree/every-byte.bin`);
        expectOk(check, "read the synced bytes in the sandbox");
        assert.equal(check.stdout.split("\n")[0], "00ff800ac80d00", "bytes changed on the way into the sandbox");
        assert.equal(check.stdout.split("\n")[1]?.trim(), "256");
        const back = path.join(world.hostDir, `bytes-back-${lease.providerLeaseId.replace(/[^a-z0-9-]/gi, "")}`);
        await world.client.env.syncOut({
          ...world.base(lease.config),
          lease: lease.lease,
          operations: [{ operationId: "bytes-out", files: [{ sourcePath: remote, targetPath: back, kind: "directory" }] }],
        });
        for (const name of ["every-byte.bin", "reversed.bin", "nul-and-high.bin"]) {
          const [sent, received] = await Promise.all([readFile(path.join(local, name)), readFile(path.join(back, name))]);
          assert.ok(sent.equals(received), `${name} came back different: ${received.subarray(0, 16).toString("hex")}…`);
        }
      });
      await rm(local, { recursive: true, force: true });
    },
  },
  {
    name: "execute-after-destroy-fails-cleanly",
    async run(world) {
      requireMethods(world, LEASE_METHODS);
      const acquired = await world.acquire();
      await world.destroy(acquired);
      const started = Date.now();
      let failed = false;
      try {
        const result = await world.sh(acquired, "echo still-here", { timeoutMs: 10_000, call: { timeoutMs: 30_000 } });
        // Answering with a failed command is acceptable; running it is not.
        failed = result.exitCode !== 0 && !result.stdout.includes("still-here");
      } catch (error) {
        failed = true;
        assert.ok(error instanceof Error && error.message.length > 0, "the error must say why");
      }
      assert.ok(failed, "a destroyed lease still ran a command");
      assert.ok(Date.now() - started < 30_000, "execute on a destroyed lease hung");
    },
  },
  {
    name: "expiry-within-requested",
    async run(world) {
      requireMethods(world, LEASE_METHODS);
      const requested = new Date(Date.now() + 30 * 60_000);
      const acquired = await world.acquire(world.options.config, { requestedExpiresAt: requested.toISOString() });
      try {
        const expiresAt = acquired.lease.expiresAt;
        if (expiresAt === null || expiresAt === undefined) {
          if (world.options.unboundedExpiry) throw new ConformanceSkip(world.options.unboundedExpiry);
          assert.fail("acquire with requestedExpiresAt returned no expiry (the host then fails closed and releases the lease)");
        }
        const returned = Date.parse(expiresAt);
        assert.ok(Number.isFinite(returned), `expiresAt is not a timestamp: ${expiresAt}`);
        assert.ok(returned <= requested.getTime(), `expiresAt ${expiresAt} is after the requested ${requested.toISOString()}`);
        expectOk(await world.sh(acquired, "true"), "the bounded lease runs commands");
      } finally {
        await world.destroy(acquired);
      }
    },
  },
  {
    name: "resource-labels",
    async run(world) {
      requireMethods(world, LEASE_METHODS);
      const labelsOf = world.options.labelsOf;
      if (!labelsOf) throw new ConformanceSkip("no labelsOf() given for this provider");
      await world.withLease(async (lease) => {
        const labels = await labelsOf(lease.providerLeaseId, lease.config);
        assert.ok(labels, `the provider lists no resource for lease ${lease.providerLeaseId}`);
        assert.equal(labels["paperclip-provider"], world.options.driverKey.toLowerCase());
        assert.ok(labels["paperclip-company"], `no paperclip-company label: ${JSON.stringify(labels)}`);
        assert.ok(labels["paperclip-environment"], `no paperclip-environment label: ${JSON.stringify(labels)}`);
        assert.ok(labels["paperclip-run"], `no paperclip-run label: ${JSON.stringify(labels)}`);
      });
    },
  },
  {
    name: "probe-leaves-nothing",
    async run(world) {
      requireMethods(world, ["environmentProbe"]);
      const leftovers = world.options.leftovers;
      if (!leftovers) throw new ConformanceSkip("no leftovers() probe given for this provider");
      const before = new Set(await leftovers(world.leftoversContext));
      await world.client.env.probe(world.base());
      const after = (await leftovers(world.leftoversContext)).filter((entry) => !before.has(entry));
      assert.deepEqual(after, [], `the probe left: ${after.join(", ")}`);
    },
  },
  {
    name: "declared-capabilities-match",
    async run(world) {
      const caps = world.driver?.sandboxCapabilities ?? {};
      const methods = new Set(world.client.supportedMethods);
      const has = (...names: string[]) => names.every((name) => methods.has(name));
      const duplex = ["duplexChannelOpen", "duplexChannelWrite", "duplexChannelStop", "duplexChannelClose"];
      assert.equal(Boolean(caps.duplexCommandStream), has(...duplex), "duplexCommandStream is declared exactly when the worker serves duplex channels");
      const login = ["loginPtyOpen", "loginPtyInput", "loginPtyStop", "loginPtyClose"];
      assert.equal(world.driver?.supportsLoginPty === true, has(...login), "supportsLoginPty is declared exactly when the worker serves the four login terminal hooks");
      if (caps.incrementalSessionOutput) {
        // The host then streams an ACP agent's whole session through one execute's live log: a
        // transport that delivers output only at the end would hang the run, so the live-output case
        // must run (and pass) for every provider that declares it.
        assert.ok(has("environmentExecute"), "incrementalSessionOutput declared without environmentExecute");
        const skipped = world.options.skip?.["execute-live-output"];
        assert.equal(skipped, undefined, `incrementalSessionOutput is declared but execute-live-output is skipped (${skipped}): declare it only where output is live`);
      }
      if (caps.independentControlCommands || caps.persistentProcessSessions) {
        // The host runs its long session command and control commands beside it on one lease.
        const skipped = world.options.skip?.["execute-control-command-beside-session-command"];
        assert.equal(skipped, undefined, `independentControlCommands/persistentProcessSessions declared but execute-control-command-beside-session-command is skipped (${skipped})`);
      }
      if (caps.nativeSyncIn || caps.nativeSyncOut) assert.ok(has("environmentSyncIn", "environmentSyncOut"), "native sync declared without both sync hooks");
      if (caps.reusableLeases) assert.ok(has("environmentResumeLease", "environmentReleaseLease"), "reusable leases declared without resume and release");
      if (caps.reusableLeases && !world.options.reuseConfig) assert.fail("reusable leases declared but no reuseConfig given to test them");
      if (!caps.reusableLeases && world.options.reuseConfig) {
        // A provider that cannot keep sandboxes must not hand back "stopped" receipts.
        const acquired = await world.acquire(world.options.reuseConfig);
        try {
          const receipt = await world.release(acquired);
          assert.notEqual(receipt?.state, "stopped", "a release kept the sandbox though the driver does not declare reusable leases");
        } finally {
          await world.destroy(acquired);
        }
      }
    },
  },
  {
    name: "worker-restart-mid-lease",
    async run(world) {
      requireMethods(world, [...LEASE_METHODS, "environmentReleaseLease"]);
      const acquired = await world.acquire();
      let released = false;
      try {
        expectOk(await world.sh(acquired, "printf before-restart > restart-marker.txt"), "write before the restart");
        await world.restartWorker();
        const read = await world.sh(acquired, "cat restart-marker.txt");
        expectOk(read, "execute from a fresh worker");
        assert.equal(read.stdout, "before-restart");
        const receipt = await world.release(acquired, { cancelActiveWork: true });
        released = true;
        assert.equal(receipt?.providerLeaseId, acquired.providerLeaseId, "a fresh worker must release the lease with a receipt");
      } finally {
        if (!released) await world.destroy(acquired).catch(() => undefined);
      }
    },
  },
  {
    name: "failure-after-create-leaves-nothing",
    async run(world) {
      requireMethods(world, LEASE_METHODS);
      const arm = world.options.faults?.failAfterCreate;
      const leftovers = world.options.leftovers;
      if (!arm) throw new ConformanceSkip("no faults.failAfterCreate for this provider");
      if (!leftovers) throw new ConformanceSkip("no leftovers() probe given for this provider");
      const before = new Set(await leftovers(world.leftoversContext));
      try {
        const config = (await arm()) ?? world.options.config;
        let acquired: AcquiredLease | undefined;
        try {
          acquired = await world.acquire(config);
        } catch {
          // expected
        }
        if (acquired) {
          await world.destroy(acquired);
          assert.fail("the acquire with a failure injected after create succeeded");
        }
        const after = await eventuallyEmpty(async () => (await leftovers(world.leftoversContext)).filter((entry) => !before.has(entry)));
        assert.deepEqual(after, [], `a failed acquire left: ${after.join(", ")}`);
      } finally {
        await world.options.faults?.reset?.();
      }
    },
  },
  {
    name: "transient-errors-retried",
    async run(world) {
      requireMethods(world, [...LEASE_METHODS, "environmentReleaseLease"]);
      const transient = world.options.faults?.transient;
      if (!transient) throw new ConformanceSkip("no faults.transient for this provider (no vendor API to fail)");
      try {
        for (const kind of ["429", "503"] as const) {
          await transient(kind, 1);
          const acquired = await world.acquire();
          await transient(kind, 1);
          expectOk(await world.sh(acquired, "true"), `execute after one ${kind}`);
          await transient(kind, 1);
          const receipt = await world.release(acquired, { cancelActiveWork: true });
          assert.equal(receipt?.providerLeaseId, acquired.providerLeaseId, `release after one ${kind}`);
        }
      } finally {
        await world.options.faults?.reset?.();
      }
    },
  },
];

/** Clean-up may finish just after the failed acquire returns: allow it a few seconds. */
async function eventuallyEmpty(read: () => Promise<string[]>, timeoutMs = 10_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let found = await read();
  while (found.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    found = await read();
  }
  return found;
}
