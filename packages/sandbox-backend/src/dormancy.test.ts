// Dormancy (idleStopMs): an idle sandbox's supervisor exits and its jail ends, so it holds no process
// and no memory; the sandbox stays running and the next call starts a fresh jail on the same disk.
// Never while something the restart would lose exists (a background process, /dev/shm content, an
// exec's unread output), and never losing a call that arrives as the supervisor goes.
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, hostProcessesMatching, startWorld, type World } from "./__fixtures__/world.js";
import type { Sandbox } from "./types.js";

const IDLE_MS = 2_000;

let world: World;
beforeAll(() => {
  world = startWorld({ idleStopMs: IDLE_MS });
});
afterAll(async () => {
  await world?.close();
});

async function sh(sandbox: Sandbox, script: string): Promise<string> {
  const out: Buffer[] = [];
  const exit = await sandbox.runner.run(script, { stdout: (chunk) => out.push(chunk) });
  expect(exit.exitCode).toBe(0);
  return Buffer.concat(out).toString();
}

/** The host processes of a sandbox's jail: its keeper names its directory, the jail's name its id. */
function jailProcesses(sandbox: Sandbox): number[] {
  return [
    ...hostProcessesMatching(sandbox.paths.dir),
    ...hostProcessesMatching("/opt/paperclip/supervisor.mjs").filter((pid) => {
      try {
        return fs.readlinkSync(`/proc/${pid}/ns/pid`) === `pid:[${JSON.parse(fs.readFileSync(`${sandbox.paths.dir}/sandbox.json`, "utf8")).jail?.pidNamespace}]`;
      } catch {
        return false;
      }
    }),
  ];
}

const dormant = async (sandbox: Sandbox) => (await world.backend.summary(sandbox.id))!.alive === false;

describe("an idle sandbox goes dormant", () => {
  it("its jail ends, no process of it is left, it stays running, and the next call runs on a fresh jail with its files", async () => {
    const sandbox = await world.create({ id: "dormant" });
    expect(await sh(sandbox, "echo kept > /workspace/file; echo $$ > /tmp/first-shell; echo ok")).toBe("ok\n");
    expect(await eventually(() => dormant(sandbox), Boolean, 10_000)).toBe(true);
    // Dormant means its keeper has gone; the jail's last processes may still be exiting on a busy machine.
    expect(
      await eventually(
        () => jailProcesses(sandbox),
        (pids) => pids.length === 0,
        30_000,
      ),
    ).toEqual([]);
    expect(sandbox.state).toBe("running");
    expect((await world.backend.summary("dormant"))!.state).toBe("running");
    // The next call wakes it: same disk, a fresh jail.
    expect(await sh(sandbox, "cat /workspace/file /tmp/first-shell >/dev/null && cat /workspace/file")).toBe("kept\n");
    expect(await dormant(sandbox)).toBe(false);
    // Exec handles and file ops wake it too.
    expect(await eventually(() => dormant(sandbox), Boolean, 10_000)).toBe(true);
    expect((await sandbox.files.read("/workspace/file")).toString()).toBe("kept\n");
    expect(await eventually(() => dormant(sandbox), Boolean, 10_000)).toBe(true);
    const handle = await sandbox.exec({ argv: ["cat", "/workspace/file"] });
    expect(await handle.exited).toMatchObject({ exitCode: 0 });
    await world.backend.destroy("dormant");
    expect(fs.existsSync(sandbox.paths.dir)).toBe(false);
  });

  it("not while a background process runs, nor while /dev/shm holds a file; then it does", async () => {
    const sandbox = await world.create({ id: "busy" });
    await sh(sandbox, "nohup sleep 1000 >/dev/null 2>&1 & echo $! > /tmp/bg; echo x > /dev/shm/held");
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 2));
    expect(await dormant(sandbox)).toBe(false);
    await sh(sandbox, 'kill "$(cat /tmp/bg)"');
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 2));
    expect(await dormant(sandbox)).toBe(false);
    await sh(sandbox, "rm /dev/shm/held");
    expect(await eventually(() => dormant(sandbox), Boolean, 10_000)).toBe(true);
    await world.backend.destroy("busy");
  });

  it("not while an exec's output waits to be read; reaping it lets it go", async () => {
    const sandbox = await world.create({ id: "kept-output" });
    const handle = await sandbox.exec({ script: "echo unread", detached: true });
    await handle.exited;
    handle.close();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 2));
    expect(await dormant(sandbox)).toBe(false);
    expect((await (await sandbox.attach(handle.pid))!.read("stdout", 0)).data.toString()).toBe("unread\n");
    await sandbox.reap(handle.pid);
    expect(await eventually(() => dormant(sandbox), Boolean, 10_000)).toBe(true);
    await world.backend.destroy("kept-output");
  });

  it("loses no call made around the moment its supervisor goes idle", async () => {
    const sandbox = await world.create({ id: "boundary" });
    await sh(sandbox, "true");
    for (let delay = IDLE_MS - 150; delay <= IDLE_MS + 150; delay += 30) {
      await new Promise((resolve) => setTimeout(resolve, delay));
      expect(await sh(sandbox, "echo alive")).toBe("alive\n");
    }
    await world.backend.destroy("boundary");
  });

  it("a new worker finds a dormant sandbox running and wakes it", async () => {
    const sandbox = await world.create({ id: "adopted" });
    await sh(sandbox, "echo adopted > /workspace/f");
    expect(await eventually(() => dormant(sandbox), Boolean, 10_000)).toBe(true);
    const next = world.newBackend();
    const found = (await next.get("adopted"))!;
    // Its keeper recorded the idle exit: the new worker sees it running.
    expect(found.state).toBe("running");
    expect(await sh(found, "cat /workspace/f")).toBe("adopted\n");
    await next.destroy("adopted");
  });

  it("a dormant sandbox can be frozen (its jail comes back, paused) and thawed, its files kept", async () => {
    const sandbox = await world.create({ id: "dormant-freeze" });
    expect(await sh(sandbox, "echo kept > /workspace/file; echo ok")).toBe("ok\n");
    expect(await eventually(() => dormant(sandbox), Boolean, 10_000)).toBe(true);
    await sandbox.freeze();
    expect(sandbox.state).toBe("frozen");
    await sandbox.thaw();
    expect(await sh(sandbox, "cat /workspace/file")).toBe("kept\n");
    await world.backend.destroy("dormant-freeze");
  });
});
