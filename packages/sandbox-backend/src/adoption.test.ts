// Jails survive their worker: after a worker is SIGKILLed, the next one adopts the sandbox from its
// directory (commands, buffered output and the egress proxy included).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createResolver, parseResolveOverrides } from "./egress/resolver.js";
import { startHttpServer, type TestServer } from "./test-support/servers.js";
import { BUILT_SUPERVISOR, hostProcessesMatching, startWorld, type World } from "./__fixtures__/world.js";

const DIST_INDEX = fileURLToPath(new URL("../dist/index.js", import.meta.url));
const RESOLVE = "granted.test=127.0.0.1";

let world: World;
let server: TestServer;
beforeAll(async () => {
  server = await startHttpServer("127.0.0.1", "through-the-proxy");
  world = startWorld({ resolver: createResolver(parseResolveOverrides(RESOLVE)) });
});
afterAll(async () => {
  await world?.close();
  await server?.close();
});

/** A worker in a process of its own: creates a sandbox, starts commands, reports, then waits to be killed. */
function startWorker(stateDir: string): Promise<{ kill(): Promise<void>; report: { detachedPid: number; marker: string } }> {
  const script = `
    import { createSandboxBackend, createResolver, parseResolveOverrides } from ${JSON.stringify(DIST_INDEX)};
    const backend = createSandboxBackend({ stateDir: ${JSON.stringify(stateDir)}, supervisorScript: ${JSON.stringify(BUILT_SUPERVISOR)}, resolver: createResolver(parseResolveOverrides(${JSON.stringify(RESOLVE)})) });
    const sandbox = await backend.create({ id: "adopted", ttlMs: 120000, egress: { allowFqdns: ["granted.test"], allowCidrs: [] }, labels: { owner: "first" } });
    const marker = String(600000 + Math.floor(Math.random() * 99999));
    const detached = await sandbox.exec({ script: "echo before-the-crash; exec sleep " + marker, detached: true });
    await detached.subscribe({ stdout: 0 }, { onData: () => process.stdout.write(JSON.stringify({ detachedPid: detached.pid, marker }) + "\\n") });
    setInterval(() => undefined, 1000);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`worker exited early (${code})`)));
    child.stdout.once("data", (chunk: Buffer) =>
      resolve({
        report: JSON.parse(chunk.toString().split("\n")[0]!),
        kill: () =>
          new Promise((done) => {
            child.removeAllListeners("exit");
            child.once("exit", () => done());
            child.kill("SIGKILL");
          }),
      }),
    );
  });
}

describe("adoption", () => {
  it("after its worker is SIGKILLed, the next worker adopts the sandbox: its detached command, its output and its egress proxy", async () => {
    const worker = await startWorker(world.stateDir);
    await worker.kill();
    // The jail did not go down with its worker.
    expect(hostProcessesMatching(`sleep ${worker.report.marker}`)).toHaveLength(1);
    expect((await world.backend.list()).find((entry) => entry.id === "adopted")).toMatchObject({ state: "running", alive: true, ownerAlive: false, labels: { owner: "first" } });

    const sandbox = (await world.backend.get("adopted"))!;
    expect(sandbox.state).toBe("running");
    expect((await world.backend.list()).find((entry) => entry.id === "adopted")?.ownerAlive).toBe(true);
    const attached = await sandbox.attach(worker.report.detachedPid);
    expect(attached).not.toBeNull();
    expect((await attached!.read("stdout", 0)).data.toString()).toBe("before-the-crash\n");

    // The dead worker's egress proxy was served again on the same socket.
    const curl = await sandbox.exec({ argv: ["curl", "-sS", "--max-time", "5", `http://granted.test:${server.port}/`] });
    expect((await curl.exited).exitCode).toBe(0);
    expect((await curl.read("stdout")).data.toString()).toBe(`through-the-proxy host=granted.test:${server.port}`);

    await attached!.signal("SIGKILL");
    expect((await attached!.exited).signal).toBe("SIGKILL");
    await world.backend.destroy("adopted");
    expect(hostProcessesMatching(`sleep ${worker.report.marker}`)).toEqual([]);
  });
});
