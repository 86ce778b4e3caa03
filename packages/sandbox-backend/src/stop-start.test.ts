// Cold stop/start: every process ends (confirmed), the disk stays, start runs a fresh jail on it.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxLeftovers } from "./test-support/leftovers.js";
import { supervisorPidOf } from "./test-support/supervisor-pid.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
beforeAll(() => {
  world = startWorld();
});
afterAll(async () => {
  await world?.close();
});

async function run(sandbox: Awaited<ReturnType<World["create"]>>, script: string): Promise<string> {
  const handle = await sandbox.exec({ script });
  await handle.exited;
  return (await handle.read("stdout")).data.toString();
}

describe("stop and start", () => {
  it("stop ends every process and keeps the files; start runs a fresh jail on the same directories", async () => {
    const sandbox = await world.create({ id: "stop-start" });
    await sandbox.files.write("/workspace/kept.txt", "kept across stop\n");
    const background = await sandbox.exec({ script: "setsid sleep 1234 & nohup sleep 1235 >/dev/null 2>&1 & sleep 1236", detached: true });
    expect(background.pid).toBeGreaterThan(0);
    expect((await sandboxLeftovers(world.stateDir)).filter((line) => line.startsWith("process"))).not.toEqual([]);

    await sandbox.stop();
    expect(sandbox.state).toBe("stopped");
    // Confirmed before stop resolved: no process of the jail (nor its keeper) is left.
    expect((await sandboxLeftovers(world.stateDir)).filter((line) => line.startsWith("process"))).toEqual([]);
    await expect(sandbox.exec({ script: "true" })).rejects.toThrow(/is stopped/);

    await sandbox.start();
    expect(sandbox.state).toBe("running");
    expect(await run(sandbox, "cat /workspace/kept.txt; pgrep -c sleep || true")).toBe("kept across stop\n0\n");
    // A fresh supervisor: it knows nothing of the commands of the jail before.
    expect(await sandbox.processes()).toHaveLength(1);
    expect((await world.backend.list()).find((entry) => entry.id === "stop-start")).toMatchObject({ state: "running", alive: true });
  });

  it("readStoredFile reads a stopped sandbox's disk from the host, never through a link sandboxed code planted", async () => {
    const sandbox = await world.create({ id: "stored" });
    // A host file the sandbox must never be made to leak: its links name host paths (they mean
    // nothing inside the jail, but would be followed by a careless host-side read).
    const hostDir = path.join(world.stateDir, "host-only");
    fs.mkdirSync(hostDir);
    fs.writeFileSync(path.join(hostDir, "key"), "host secret\n");
    await run(
      sandbox,
      `mkdir -p /workspace/.state && echo sentinel > /workspace/.state/file && ln -s ${hostDir} /workspace/dirlink && ln -s ${hostDir}/key /workspace/filelink && ln -s ${hostDir} /workspace/.state/inner`,
    );
    await sandbox.stop();
    expect((await sandbox.readStoredFile("/workspace/.state/file"))?.toString()).toBe("sentinel\n");
    expect(await sandbox.readStoredFile("/workspace/dirlink/key")).toBeNull();
    expect(await sandbox.readStoredFile("/workspace/filelink")).toBeNull();
    expect(await sandbox.readStoredFile("/workspace/.state/inner/key")).toBeNull();
    expect(await sandbox.readStoredFile("/workspace/.state/file", { maxBytes: 3 })).toBeNull();
    expect(await sandbox.readStoredFile("/workspace/missing")).toBeNull();
    await expect(sandbox.readStoredFile("/etc/passwd")).rejects.toThrow(/under \/workspace, \/home\/sandbox or \/tmp/);
  });

  it("start after the jail died on its own tidies what it left and runs again", async () => {
    const sandbox = await world.create({ id: "died" });
    expect(await run(sandbox, "echo up")).toBe("up\n");
    // As when the kernel ends it (sandboxed code cannot: the seccomp filter refuses signals to it):
    // the supervisor is the only child of the jail's init, and its end is the jail's.
    const supervisor = supervisorPidOf(sandbox.paths.dir);
    expect(supervisor).not.toBeNull();
    process.kill(supervisor!, "SIGKILL");
    const deadline = Date.now() + 10_000;
    while (sandbox.state === "running" && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sandbox.state).toBe("stopped");
    await sandbox.start();
    expect(await run(sandbox, "echo back")).toBe("back\n");
  });
});
