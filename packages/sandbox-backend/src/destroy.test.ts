// destroy resolves only once nothing of the sandbox is left: no process, no cgroup, no directory.
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxLeftovers } from "./test-support/leftovers.js";
import { BUILT_SUPERVISOR, hostProcessesMatching, startWorld, type World } from "./__fixtures__/world.js";

const isRoot = process.getuid?.() === 0;

let world: World;
beforeAll(() => {
  world = startWorld();
});
afterAll(async () => {
  await world?.close();
});

describe("destroy", () => {
  it("leaves no process, cgroup or directory behind, checked right after it resolves; a second destroy is a no-op", async () => {
    const sandbox = await world.create({ id: "doomed", limits: isRoot ? { pids: 64, memoryMb: 256 } : {} });
    const tree = await sandbox.exec({
      script: "setsid sleep 4001 >/dev/null 2>&1 </dev/null & nohup sleep 4002 >/dev/null 2>&1 & (trap '' TERM HUP; exec sleep 4003) & echo started",
      detached: true,
    });
    await tree.exited;
    expect(hostProcessesMatching("sleep 400")).toHaveLength(3);
    const before = await sandboxLeftovers(world.stateDir, ["doomed"]);
    // The keeper (its argv names the deadline file); bwrap's options are on a pipe, out of `ps`.
    const processes = before.filter((line) => line.startsWith("process"));
    expect(processes.length).toBeGreaterThanOrEqual(1);
    expect(processes.every((line) => line.includes("/bin/sh -c"))).toBe(true);
    // memory, pids and the freezer.
    if (isRoot) expect(before.filter((line) => line.startsWith("cgroup")).length).toBe(3);

    await world.backend.destroy("doomed");
    expect(hostProcessesMatching("sleep 400")).toEqual([]);
    expect(await sandboxLeftovers(world.stateDir, ["doomed"])).toEqual([]);
    expect(sandbox.state).toBe("destroyed");
    expect(await world.backend.get("doomed")).toBeNull();
    await world.backend.destroy("doomed");
    await world.newBackend().destroy("never-existed");
  });

  it("a create that fails half-way leaves nothing behind (no proxy socket, cgroup or directory)", async () => {
    await expect(
      world.create({ id: "half-way", rootfs: "/nonexistent/paperclip-rootfs", egress: { allowFqdns: ["example.com"], allowCidrs: [] }, limits: isRoot ? { pids: 64 } : {} }),
    ).rejects.toThrow();
    expect(await sandboxLeftovers(world.stateDir, ["half-way"])).toEqual([]);
    // A jail whose tree is broken after its namespaces exist (here: no supervisor) ends on its own;
    // the next command says so, and destroy still leaves nothing.
    const broken = world.newBackend({ supervisorScript: "/nonexistent/supervisor.mjs" });
    const doomed = await broken.create({ id: "no-supervisor", ttlMs: 60_000 }).catch((error: Error) => error);
    if (!(doomed instanceof Error)) {
      await expect(doomed.runner.run("true", {})).rejects.toThrow(/has ended|unreachable|connection/);
      await broken.destroy("no-supervisor");
    }
    expect(await sandboxLeftovers(world.stateDir, ["no-supervisor"])).toEqual([]);
    expect(fs.existsSync(BUILT_SUPERVISOR)).toBe(true);
  });

  it("destroys a directory a crashed create left without a record", async () => {
    fs.mkdirSync(`${world.stateDir}/leases/orphan-dir/workspace`, { recursive: true });
    expect((await world.backend.list()).find((entry) => entry.id === "orphan-dir")).toMatchObject({ state: "incomplete", alive: false });
    await world.backend.destroy("orphan-dir");
    expect(await sandboxLeftovers(world.stateDir, ["orphan-dir"])).toEqual([]);
  });

  it("close waits for a destroy under way, so the state directory can go right after it", async () => {
    const backend = world.newBackend();
    await backend.create({ id: "ending-at-close", ttlMs: 60_000 });
    let destroyed = false;
    const destroying = backend.destroy("ending-at-close").then(() => (destroyed = true));
    await backend.close();
    expect(destroyed).toBe(true);
    await destroying;
    expect(await sandboxLeftovers(world.stateDir, ["ending-at-close"])).toEqual([]);
  });

  it("close waits for a stop or freeze made through a sandbox's own handle (an emulator's timer ending or pausing it)", async () => {
    const backend = world.newBackend();
    const frozen = await backend.create({ id: "handle-freeze-at-close", ttlMs: 60_000 });
    const stopped = await backend.create({ id: "handle-stop-at-close", ttlMs: 60_000 });
    const done: string[] = [];
    const freezing = frozen.freeze().then(() => done.push("freeze"));
    const stopping = stopped.stop().then(() => done.push("stop"));
    await backend.close();
    expect(done.sort()).toEqual(["freeze", "stop"]);
    await Promise.all([freezing, stopping]);
    expect([frozen.state, stopped.state]).toEqual(["frozen", "stopped"]);
    await world.backend.destroy("handle-freeze-at-close");
    await world.backend.destroy("handle-stop-at-close");
    expect(await sandboxLeftovers(world.stateDir, ["handle-freeze-at-close", "handle-stop-at-close"])).toEqual([]);
  });

  it("close waits for a create under way, and lets its sandbox go like the others", async () => {
    const backend = world.newBackend();
    let created = false;
    const creating = backend.create({ id: "created-at-close", ttlMs: 60_000 }).then((sandbox) => ((created = true), sandbox));
    await backend.close();
    expect(created).toBe(true);
    const sandbox = await creating;
    await expect(sandbox.stop()).rejects.toThrow(/let go/);
    await world.backend.destroy("created-at-close");
    expect(await sandboxLeftovers(world.stateDir, ["created-at-close"])).toEqual([]);
  });
});
