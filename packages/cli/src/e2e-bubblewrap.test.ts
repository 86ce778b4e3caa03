import { chmodSync, existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { childPids, killStartedClis, makeSandboxHome, pidsWithArgv, processAlive, providerBuilt, runCli, startCli, uniqueSleep, waitFor } from "./__fixtures__/cli-harness.js";

/**
 * End to end against the default provider, bubblewrap. Lease state goes to a per-test-file
 * `stateDir` so listing-based clean-up sees only this file's leases.
 */
describe.skipIf(!providerBuilt("bubblewrap"))("paperclip-sandbox against bubblewrap", () => {
  const home = makeSandboxHome("bwrap");
  const stateDir = path.join(home.root, "bwrap-state");
  // As root, jails run as an unprivileged host uid that must pass every directory on the way to
  // the state dir (the provider refuses one it cannot reach, naming it); mkdtemp makes 0700.
  chmodSync(home.root, 0o711);
  const P = ["--db", home.db, "--set", `stateDir=${stateDir}`];
  const cli = (args: string[], timeoutMs?: number) => runCli(args, { env: home.env, timeoutMs });
  const leaseDirs = () => (existsSync(path.join(stateDir, "leases")) ? readdirSync(path.join(stateDir, "leases")) : []);
  const liveLeases = async (db = home.db) => {
    const r = await cli(["leases", "ls", "--db", db, "--json"]);
    return (JSON.parse(r.stdout) as { leases: { state: string; providerLeaseId: string }[] }).leases;
  };

  afterEach(() => killStartedClis());
  afterAll(() => home.dispose());

  it("probe passes (bubblewrap is the default provider)", async () => {
    const r = await cli(["probe", ...P]);
    expect(r.stdout).toMatch(/^probe bubblewrap: PASS/);
    expect(r.code).toBe(0);
  });

  it("run: the workspace round-trips through the sandbox and the exit code comes back", async () => {
    const workspace = path.join(home.root, "project");
    await mkdir(workspace, { recursive: true });
    await writeFile(path.join(workspace, "input.txt"), "42\n");
    const r = await cli(["run", ...P, "--workspace", workspace, "--", "sh", "-c", 'echo "cwd=$(pwd)"; cat input.txt; echo 43 > output.txt; exit 5']);
    expect(r.code).toBe(5);
    expect(r.stdout).toBe("cwd=/workspace/project\n42\n");
    expect(await readFile(path.join(workspace, "output.txt"), "utf8")).toBe("43\n");
    expect(await liveLeases()).toEqual([]);
    expect(leaseDirs()).toEqual([]);
  });

  it("crash mid-run (CLI and worker SIGKILLed), then leases gc leaves nothing behind", async () => {
    const workspace = path.join(home.root, "crash");
    await mkdir(workspace, { recursive: true });
    const sleep = uniqueSleep();
    const running = startCli(["run", ...P, "--workspace", workspace, "--", "sh", "-c", `echo ready; exec ${sleep.join(" ")}`], { env: home.env });
    await waitFor(() => running.stdout().includes("ready"), 30_000, "the command to start");
    const cliPid = running.child.pid!;
    const workers = childPids(cliPid);
    for (const pid of [cliPid, ...workers]) process.kill(pid, "SIGKILL");
    await running.done;
    await waitFor(() => workers.every((pid) => !processAlive(pid)), 5_000, "the worker to die");
    expect((await liveLeases()).map((l) => l.state)).toEqual(["active"]);
    expect(leaseDirs()).toHaveLength(1);

    const gc = await cli(["leases", "gc", "--db", home.db]);
    expect(gc.code).toBe(0);
    expect(gc.stdout).toMatch(/destroyed\s+bubblewrap\s+bwrap-\S+\s+db\s+owner pid \d+ is gone/);
    expect(await liveLeases()).toEqual([]);
    expect(leaseDirs()).toEqual([]);
    await waitFor(() => pidsWithArgv(sleep).length === 0, 5_000, "the sandboxed command to be gone");
  });

  it("gc also finds, through the provider's lease listing, a leaked lease the database does not know", async () => {
    const workspace = path.join(home.root, "crash2");
    await mkdir(workspace, { recursive: true });
    const otherDb = path.join(home.root, "other.db");
    const running = startCli(["run", "--db", otherDb, "--set", `stateDir=${stateDir}`, "--workspace", workspace, "--", "sh", "-c", "echo ready; exec sleep 600"], { env: home.env });
    await waitFor(() => running.stdout().includes("ready"), 30_000, "the command to start");
    const workers = childPids(running.child.pid!);
    for (const pid of [running.child.pid!, ...workers]) process.kill(pid, "SIGKILL");
    await running.done;
    await waitFor(() => workers.every((pid) => !processAlive(pid)), 5_000, "the worker to die");
    expect(leaseDirs()).toHaveLength(1);

    // A fresh database has never heard of it; the listing is per state dir, which a DB row names.
    const freshDb = path.join(home.root, "fresh.db");
    const seed = await cli(["run", "--db", freshDb, "--set", `stateDir=${stateDir}`, "--workspace", workspace, "--", "true"]);
    expect(seed.code).toBe(0);
    const young = await cli(["leases", "gc", "--db", freshDb]);
    expect(young.stdout).toMatch(/nothing to clean up/);
    expect(leaseDirs()).toHaveLength(1);
    const gc = await cli(["leases", "gc", "--db", freshDb, "--min-age", "0"]);
    expect(gc.code).toBe(0);
    expect(gc.stdout).toMatch(/destroyed\s+bubblewrap\s+bwrap-\S+\s+listing\s+not in the lease database/);
    expect(leaseDirs()).toEqual([]);
  });

  it("bench with 100 samples produces a PASS report (mode 0600)", async () => {
    const out = path.join(home.root, "bench-bwrap.json");
    const r = await cli(["bench", ...P, "--samples", "100", "--sync-samples", "3", "--out", out], 600_000);
    expect(r.stdout).toMatch(/^bench bubblewrap: PASS/);
    expect(r.code).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const report = JSON.parse(readFileSync(out, "utf8")) as {
      verdict: string;
      metrics: Record<string, { verdict: string; count: number; ok: number }>;
    };
    expect(report.verdict).toBe("PASS");
    for (const metric of ["warmAcquire", "coldAcquire", "coldFirstCommand", "steadyCommand", "cleanup"]) {
      expect(report.metrics[metric]).toMatchObject({ verdict: "PASS", count: 100, ok: 100 });
    }
    expect(await liveLeases()).toEqual([]);
    expect(leaseDirs()).toEqual([]);
  }, 600_000);
});
