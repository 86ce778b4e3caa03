import { randomBytes } from "node:crypto";
import type { ConformanceCase } from "../case.js";
import { hostProcessesWithArgv } from "../host-processes.js";
import { requireMethods } from "../case.js";
import { assert, expectOk, shellQuote } from "../expect.js";
import { ConformanceSkip } from "../skip.js";
import type { AcquiredLease, ConformanceWorld } from "../world.js";

const LEASE_METHODS = ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute"];

export const leaseLifecycleCases: ConformanceCase[] = [
  {
    name: "acquire",
    async run(world) {
      requireMethods(world, LEASE_METHODS);
      // world.acquire already insists on providerLeaseId and an absolute metadata.remoteCwd.
      await world.withLease(async (acquired) => {
        const probe = await world.sh(acquired, `test -d ${shellQuote(acquired.remoteCwd)} && test -w ${shellQuote(acquired.remoteCwd)}`);
        expectOk(probe, "remoteCwd must be an existing, writable directory in the sandbox");
      });
    },
  },
  {
    name: "realize-workspace",
    async run(world) {
      requireMethods(world, [...LEASE_METHODS, "environmentRealizeWorkspace"]);
      await world.withLease(async (acquired) => {
        const realized = await world.client.env.realizeWorkspace({
          ...world.base(acquired.config),
          lease: acquired.lease,
          workspace: { localPath: world.hostDir, remotePath: acquired.remoteCwd },
        });
        assert.equal(typeof realized.cwd, "string", "realizeWorkspace must return a cwd");
        assert.ok(realized.cwd.startsWith("/"), `realized cwd must be absolute: ${realized.cwd}`);
        expectOk(await world.sh(acquired, "pwd", { cwd: realized.cwd }), "a command must run in the realized cwd");
      });
    },
  },
  {
    name: "release-receipt-after-execution",
    async run(world) {
      requireMethods(world, [...LEASE_METHODS, "environmentReleaseLease"]);
      const acquired = await world.acquire();
      let released = false;
      try {
        const background = await world.sh(acquired, "nohup sleep 300 >/dev/null 2>&1 & echo $!");
        expectOk(background, "start a background process");
        // An execute still running when the operator stops the lease must have ended by the receipt.
        let inflightSettled = false;
        const inflight = world
          .sh(acquired, "sleep 300", { timeoutMs: 20_000 })
          .catch(() => undefined)
          .finally(() => {
            inflightSettled = true;
          });
        await new Promise((resolve) => setTimeout(resolve, 300));
        const receipt = await world.release(acquired, { cancelActiveWork: true });
        released = true;
        assert.ok(receipt, "releaseLease returned no termination receipt");
        assert.equal(receipt.providerLeaseId, acquired.providerLeaseId, "receipt must name the released lease");
        assert.ok(["stopped", "destroyed"].includes(receipt.state), `receipt state ${JSON.stringify(receipt.state)}`);
        await Promise.race([inflight, new Promise((resolve) => setTimeout(resolve, 2_000))]);
        assert.ok(inflightSettled, "an execute in flight was still running after the release receipt");
        await expectLeaseGone(world, acquired);
      } finally {
        if (!released) await world.destroy(acquired).catch(() => undefined);
      }
    },
  },
  {
    // A receipt means nothing of that sandbox runs any more: looked at right after it, not a moment
    // later. Processes that outlive their command in every way a command can leave them: in the
    // background, under nohup, orphaned by a subshell, and in a session of their own.
    name: "release-receipt-ends-every-process",
    async run(world) {
      requireMethods(world, [...LEASE_METHODS, "environmentReleaseLease"]);
      const marker = `paperclip-conformance-${randomBytes(6).toString("hex")}`;
      const loop = `'while :; do sleep 1; done'`;
      const acquired = await world.acquire();
      let released = false;
      try {
        const started = await world.sh(
          acquired,
          [
            `sh -c ${loop} ${marker}-background >/dev/null 2>&1 &`,
            `nohup sh -c ${loop} ${marker}-nohup >/dev/null 2>&1 &`,
            `(sh -c ${loop} ${marker}-orphan >/dev/null 2>&1 &)`,
            `if command -v setsid >/dev/null 2>&1; then setsid sh -c ${loop} ${marker}-setsid >/dev/null 2>&1 & fi`,
            "echo started",
          ].join("\n"),
        );
        expectOk(started, "start processes that outlive their command");
        // Where the sandbox's processes are this machine's (a local provider, an emulator's jails),
        // they are checked directly; otherwise only the provider's own leftovers probe can tell.
        let before: string[] = [];
        for (let waited = 0; waited < 5_000 && before.length < 3; waited += 50) {
          before = await hostProcessesWithArgv(marker);
          if (before.length < 3) await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const receipt = await world.release(acquired);
        released = true;
        const after = await hostProcessesWithArgv(marker);
        assert.ok(receipt, "releaseLease returned no termination receipt");
        assert.deepEqual(after, [], `still running right after the ${receipt.state} receipt: ${after.join(", ")}`);
        if (world.options.leftovers) {
          const found = await world.options.leftovers(world.leftoversContext);
          assert.deepEqual(found, [], `still there right after the receipt: ${found.join(", ")}`);
        } else if (before.length === 0) {
          throw new ConformanceSkip("the sandbox's processes are not on this machine and no leftovers() probe was given");
        }
      } finally {
        if (!released) await world.destroy(acquired).catch(() => undefined);
      }
    },
  },
  {
    name: "resume-reusable-lease",
    async run(world) {
      requireMethods(world, [...LEASE_METHODS, "environmentResumeLease", "environmentReleaseLease"]);
      const reuseConfig = world.options.reuseConfig;
      if (!reuseConfig) throw new ConformanceSkip("no reuseConfig given (provider has no reusable leases)");
      const first = await world.acquire(reuseConfig);
      let current: AcquiredLease = first;
      try {
        expectOk(await world.sh(first, "printf kept > kept-across-resume.txt"), "write a file before release");
        await world.release(first);
        const resumed = await world.client.env.resumeLease({
          ...world.base(reuseConfig),
          providerLeaseId: first.providerLeaseId,
          leaseMetadata: first.lease.metadata,
        });
        world.track(resumed);
        assert.equal(resumed.providerLeaseId, first.providerLeaseId, "a reusable lease must resume under the same id");
        const remoteCwd = typeof resumed.metadata?.remoteCwd === "string" ? resumed.metadata.remoteCwd : first.remoteCwd;
        current = { ...first, lease: resumed, remoteCwd };
        const read = await world.sh(current, "cat kept-across-resume.txt");
        expectOk(read, "the file written before release must still be there");
        assert.equal(read.stdout, "kept");
      } finally {
        await world.destroy(current);
      }
    },
  },
  {
    name: "destroy-twice",
    async run(world) {
      requireMethods(world, ["environmentAcquireLease", "environmentDestroyLease"]);
      const acquired = await world.acquire();
      await world.destroy(acquired);
      // The host retries cleanup; a second destroy of a gone lease must not fail.
      await world.destroy(acquired);
    },
  },
  {
    name: "nothing-left-behind",
    async run(world) {
      const leftovers = world.options.leftovers;
      if (!leftovers) throw new ConformanceSkip("no leftovers() probe given for this provider");
      const found = await leftovers(world.leftoversContext);
      assert.deepEqual(found, [], `left behind after the suite: ${found.join(", ")}`);
    },
  },
];

/** After a release the provider reports the lease gone (resume → null/expired) and leaves nothing. */
async function expectLeaseGone(world: ConformanceWorld, acquired: AcquiredLease): Promise<void> {
  if (world.client.supportedMethods.includes("environmentResumeLease")) {
    const resumed = await world.client.env.resumeLease({
      ...world.base(acquired.config),
      providerLeaseId: acquired.providerLeaseId,
      leaseMetadata: acquired.lease.metadata,
    });
    assert.equal(resumed.providerLeaseId, null, `a released lease resumed: ${JSON.stringify(resumed)}`);
  }
  if (world.options.leftovers) {
    const found = await world.options.leftovers(world.leftoversContext);
    assert.deepEqual(found, [], `still there after release: ${found.join(", ")}`);
  }
}
