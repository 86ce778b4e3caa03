// Warm freeze/thaw keeps a running process and its memory: a counter resumes where it stopped.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "./types.js";
import { eventually, sleep, startWorld, type World } from "./__fixtures__/world.js";

// The cgroup freezer needs a worker that may create cgroups (root on this cgroup v1 host); the
// signal method works for any worker.
const canUseCgroups = process.getuid?.() === 0 && (fs.existsSync("/sys/fs/cgroup/freezer") || fs.existsSync("/sys/fs/cgroup/cgroup.controllers"));

let world: World;
beforeAll(() => {
  world = startWorld();
});
afterAll(async () => {
  await world?.close();
});

/** Numbers the counter wrote so far (host side of the sandbox's /tmp: read-only use in a test). */
function counted(sandbox: Sandbox): number[] {
  const text = fs.existsSync(path.join(sandbox.paths.tmp, "counter")) ? fs.readFileSync(path.join(sandbox.paths.tmp, "counter"), "utf8") : "";
  return text.split("\n").filter(Boolean).map(Number);
}

// The count lives only in the shell's memory: a restart would begin at 1 again, a lost process
// would stop counting; a frozen one must neither count nor skip.
const COUNTER = "i=0; while :; do i=$((i+1)); echo $i >> /tmp/counter; sleep 0.02; done";

async function freezeKeepsTheCounter(sandbox: Sandbox): Promise<void> {
  const counter = await sandbox.exec({ script: COUNTER, detached: true });
  await eventually(
    () => counted(sandbox),
    (numbers) => numbers.length >= 5,
  );

  await sandbox.freeze();
  expect(sandbox.state).toBe("frozen");
  const atFreeze = counted(sandbox);
  await sleep(500);
  // Nothing ran while frozen.
  expect(counted(sandbox)).toEqual(atFreeze);
  await expect(sandbox.processes()).rejects.toThrow(/frozen: thaw it first/);

  await sandbox.thaw();
  expect(sandbox.state).toBe("running");
  const after = await eventually(
    () => counted(sandbox),
    (numbers) => numbers.length >= atFreeze.length + 5,
  );
  // One unbroken sequence from 1: no gap, no restart, so the same process with the same memory.
  expect(after).toEqual(after.map((_, index) => index + 1));
  expect(after.length).toBeGreaterThanOrEqual(atFreeze.length + 5);
  expect((await sandbox.processes()).find((entry) => entry.pid === counter.pid)).toMatchObject({ running: true });
  await counter.signal("SIGKILL", { group: true });
}

describe("freeze and thaw", () => {
  it.skipIf(!canUseCgroups)("with the cgroup freezer, keep a running counter's process and memory: it resumes where it stopped", async () => {
    const sandbox = await world.create({ id: "freeze-cgroup" });
    await freezeKeepsTheCounter(sandbox);
    const record = JSON.parse(fs.readFileSync(path.join(sandbox.paths.dir, "sandbox.json"), "utf8"));
    expect(record.freezer?.version).toBe(1);
  });

  it.skipIf(!canUseCgroups)("freezes a jail whose shell forks without pause (a vfork parent must not hold the freezer in FREEZING)", async () => {
    const sandbox = await world.create({ id: "freeze-forking" });
    const forker = await sandbox.exec({ script: "while :; do /bin/true; done", detached: true });
    for (let i = 0; i < 300; i += 1) {
      await sandbox.freeze();
      await sandbox.thaw();
    }
    expect((await sandbox.processes()).find((entry) => entry.pid === forker.pid)).toMatchObject({ running: true });
    await forker.signal("SIGKILL", { group: true });
  });

  it("with signals (no cgroup access), keep a running counter's process and memory: it resumes where it stopped", async () => {
    const backend = world.newBackend({ freezer: "signal" });
    const sandbox = await backend.create({ id: "freeze-signal", ttlMs: 120_000 });
    await freezeKeepsTheCounter(sandbox);
  });

  it("leaves a process that was stopped before the freeze stopped after the thaw (signal method)", async () => {
    const backend = world.newBackend({ freezer: "signal" });
    const sandbox = await backend.create({ id: "freeze-prestopped", ttlMs: 120_000 });
    const sleeper = await sandbox.exec({ script: "sleep 300", detached: true });
    const stop = await sandbox.exec({ argv: ["kill", "-STOP", String(sleeper.pid)] });
    await stop.exited;
    // kill returns once the signal is sent; the process shows stopped when it next runs. Frozen before
    // that, it counts as running, and the thaw rightly continues it.
    const stopped = await sandbox.exec({
      argv: ["sh", "-c", `i=0; while [ "$(cut -d' ' -f3 /proc/${sleeper.pid}/stat)" != T ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done`],
    });
    await stopped.exited;
    await sandbox.freeze();
    await sandbox.thaw();
    const state = await sandbox.exec({ argv: ["sh", "-c", `cut -d' ' -f3 /proc/${sleeper.pid}/stat`] });
    await state.exited;
    expect((await state.read("stdout")).data.toString()).toBe("T\n");
  });

  it("a frozen sandbox survives a worker restart and thaws from the next worker; destroying a frozen one leaves nothing", async () => {
    const sandbox = await world.create({ id: "freeze-adopted" });
    await freezeKeepsTheCounter(sandbox);
    await sandbox.freeze();
    await world.backend.close();
    const next = world.newBackend();
    const adopted = (await next.get("freeze-adopted"))!;
    expect(adopted.state).toBe("frozen");
    await adopted.thaw();
    expect(adopted.state).toBe("running");
    await adopted.freeze();
    await next.destroy("freeze-adopted");
    expect(fs.existsSync(adopted.paths.dir)).toBe(false);
  });
});
