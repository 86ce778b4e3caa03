// The expiry is enforced from the host (the keeper), can move, and sandboxed code cannot stop it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxLeftovers } from "./test-support/leftovers.js";
import { isStopped, supervisorPidOf } from "./test-support/supervisor-pid.js";
import { eventually, hostProcessesMatching, sleep, startWorld, type World } from "./__fixtures__/world.js";

let world: World;
beforeAll(() => {
  world = startWorld();
});
afterAll(async () => {
  await world?.close();
});

const tag = () => String(500_000 + Math.floor(Math.random() * 99_999));
const processLeftovers = async (id: string) => (await sandboxLeftovers(world.stateDir, [id])).filter((line) => line.startsWith("process"));

describe("expiry", () => {
  it("extendTtl moves the real expiry: the jail outlives its first deadline and ends at the new one", async () => {
    const created = Date.now();
    const sandbox = await world.create({ id: "extended", ttlMs: 1_500 });
    const marker = tag();
    await sandbox.exec({ script: `exec sleep ${marker}`, detached: true });
    await sandbox.extendTtl(created + 4_500);
    expect(sandbox.expiresAt).toBe(created + 4_500);

    await sleep(created + 2_500 - Date.now());
    // Past the first deadline: still running, still answering.
    expect(hostProcessesMatching(`sleep ${marker}`)).toHaveLength(1);
    const alive = await sandbox.exec({ argv: ["echo", "still here"] });
    await alive.exited;
    expect((await alive.read("stdout")).data.toString()).toBe("still here\n");

    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${marker}`),
        (pids) => pids.length === 0,
        10_000,
      ),
    ).toEqual([]);
    expect(Date.now()).toBeGreaterThanOrEqual(created + 4_500 - 100);
    expect(
      await eventually(
        () => processLeftovers("extended"),
        (found) => found.length === 0,
        3_000,
      ),
    ).toEqual([]);
    expect(await world.backend.get("extended")).toBeNull();
    await world.backend.destroy("extended");
  });

  it("extendTtl can bring the expiry forward too", async () => {
    const sandbox = await world.create({ id: "shortened", ttlMs: 120_000 });
    const marker = tag();
    await sandbox.exec({ script: `exec sleep ${marker}`, detached: true });
    // Seen running first: a detached command still starting is no process yet, and "none left"
    // would pass before the expiry it is meant to show.
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${marker}`),
        (pids) => pids.length > 0,
        8_000,
      ),
    ).not.toEqual([]);
    const until = Date.now() + 800;
    await sandbox.extendTtl(until);
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${marker}`),
        (pids) => pids.length === 0,
        8_000,
      ),
    ).toEqual([]);
    expect(Date.now()).toBeGreaterThanOrEqual(until - 100);
    await world.backend.destroy("shortened");
  });

  it("a stalled supervisor does not keep the jail past its deadline", async () => {
    const sandbox = await world.create({ id: "hostile-expiry", ttlMs: 2_000 });
    const marker = tag();
    await sandbox.exec({ script: `nohup sleep ${marker} >/dev/null 2>&1 &`, detached: true });
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${marker}`),
        (pids) => pids.length === 1,
      ),
    ).toHaveLength(1);
    // Sandboxed code cannot stop it (the seccomp filter, supervisor-attacks tests): stopped from the
    // host here, as a hung supervisor would be. The keeper, outside the jail, still ends it.
    const supervisor = supervisorPidOf(sandbox.paths.dir)!;
    process.kill(supervisor, "SIGSTOP");
    expect(await eventually(() => isStopped(supervisor), Boolean)).toBe(true);
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${marker}`),
        (pids) => pids.length === 0,
        10_000,
      ),
    ).toEqual([]);
    expect(
      await eventually(
        () => processLeftovers("hostile-expiry"),
        (found) => found.length === 0,
        3_000,
      ),
    ).toEqual([]);
    await world.backend.destroy("hostile-expiry");
  });

  it("refuses an expiry in the past or too far away, naming the rule", async () => {
    const sandbox = await world.create({ id: "expiry-input" });
    await expect(sandbox.extendTtl(Date.now() - 1)).rejects.toThrow(/extendTtl untilMs must be in the future/);
    await expect(sandbox.extendTtl(Date.now() + 400 * 24 * 3600 * 1000)).rejects.toThrow(/at most \d+ ms from now/);
    await expect(world.backend.create({ ttlMs: -5 })).rejects.toThrow(/ttlMs must be a number of milliseconds/);
    await expect(world.backend.create({ ttlMs: 1000, expiresAt: Date.now() + 1000 })).rejects.toThrow(/exactly one of ttlMs and expiresAt/);
  });
});
