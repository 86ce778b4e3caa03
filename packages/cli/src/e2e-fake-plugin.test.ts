import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { childPids, makeSandboxHome, killStartedClis, nonEmptyLines, pidsWithArgv, processAlive, providerBuilt, runCli, startCli, uniqueSleep, waitFor } from "./__fixtures__/cli-harness.js";

/** End to end: the built CLI against the fake-plugin provider (commands run on the host). */
describe.skipIf(!providerBuilt("fake-plugin"))("paperclip-sandbox against fake-plugin", () => {
  const home = makeSandboxHome("fake");
  const P = ["--provider", "fake-plugin", "--db", home.db];
  const cli = (args: string[], env: Record<string, string> = {}) => runCli(args, { env: { ...home.env, ...env } });
  const leases = async (all = true) => {
    const result = await cli(["leases", "ls", "--db", home.db, "--json", ...(all ? ["--all"] : [])]);
    expect(result.code).toBe(0);
    return (JSON.parse(result.stdout) as { leases: { id: string; state: string; providerLeaseId: string | null; config: unknown }[] }).leases;
  };

  afterEach(() => killStartedClis());
  afterAll(() => home.dispose());

  describe("validate and probe", () => {
    it("validate passes a good config and exits 0", async () => {
      const r = await cli(["validate", ...P, "--set", "timeoutMs=5000"]);
      expect(r.stdout).toContain("validate fake-plugin: PASS");
      expect(r.code).toBe(0);
    });

    it("validate prints the provider's errors and exits 1 for a bad config", async () => {
      const r = await cli(["validate", ...P, "--set", "acquireDelayMs=700000"]);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/validate fake-plugin: FAIL\n\s+\[error\] Acquire delay \(ms\): must be at most 600000/);
    });

    it("probe prints diagnostics and exits 0", async () => {
      const r = await cli(["probe", ...P]);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/probe fake-plugin: PASS/);
      expect(r.stdout).toMatch(/\[warning\] .*FAKE_NO_ISOLATION/);
    });

    it("probe exits 1 on failure and never echoes a secret", async () => {
      const secret = "hunter2-very-secret-value";
      const r = await cli(["probe", ...P, "--secret", "probeFailure=PROBE_SECRET"], { PROBE_SECRET: secret });
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/probe fake-plugin: FAIL/);
      expect(r.stdout + r.stderr).toContain("[REDACTED]");
      expect(r.stdout + r.stderr).not.toContain(secret);
      const json = await cli(["probe", ...P, "--json", "--secret", "probeFailure=PROBE_SECRET"], { PROBE_SECRET: secret });
      expect(json.stdout).not.toContain(secret);
      expect((JSON.parse(json.stdout) as { ok: boolean }).ok).toBe(false);
    });
  });

  describe("bad input gives one clear line and a non-zero exit", () => {
    const cases: [string, string[], Record<string, string>, RegExp][] = [
      ["unknown provider", ["run", "--provider", "nosuch", "--", "true"], {}, /^paperclip-sandbox: unknown provider 'nosuch' \(known: [^)]*\bbubblewrap, [^)]*\bnovita\b/],
      ["invalid config", ["run", ...["--provider", "fake-plugin"], "--set", "acquireDelayMs=700000", "--", "true"], {}, /^paperclip-sandbox: invalid config for fake-plugin: Acquire delay \(ms\)/],
      [
        "missing secret",
        ["run", "--provider", "fake-plugin", "--secret", "probeFailure=NOT_SET_ANYWHERE", "--", "true"],
        {},
        /^paperclip-sandbox: secret 'probeFailure': environment variable NOT_SET_ANYWHERE is not set$/,
      ],
      [
        "missing secret file",
        ["probe", "--provider", "fake-plugin", "--secret-file", "probeFailure=/nonexistent/secret"],
        {},
        /^paperclip-sandbox: secret 'probeFailure': cannot read \/nonexistent\/secret \(ENOENT\)$/,
      ],
      ["unknown config field", ["probe", "--provider", "fake-plugin", "--set", "nope=1"], {}, /^paperclip-sandbox: --set nope: unknown config field/],
      ["mistyped config field", ["probe", "--provider", "fake-plugin", "--set", "timeoutMs=soon"], {}, /^paperclip-sandbox: --set timeoutMs: expected an integer/],
      ["missing config file", ["validate", "--provider", "fake-plugin", "--config", "/nonexistent.yaml"], {}, /^paperclip-sandbox: cannot read config file \/nonexistent\.yaml: ENOENT$/],
      ["unknown flag", ["run", "--frobnicate", "--", "true"], {}, /^paperclip-sandbox: run: Unknown option '--frobnicate'/],
      ["unknown command", ["frobnicate"], {}, /^paperclip-sandbox: unknown command 'frobnicate'/],
      ["run without a command", ["run", "--provider", "fake-plugin"], {}, /^paperclip-sandbox: run: missing command/],
      ["bad sample count", ["bench", "--provider", "fake-plugin", "--samples", "0"], {}, /^paperclip-sandbox: --samples: expected a positive integer/],
    ];
    it.each(cases)("%s", async (_name, args, env, pattern) => {
      const r = await cli([args[0]!, "--db", home.db, ...args.slice(1)], env);
      expect(r.code).toBe(64);
      expect(nonEmptyLines(r.stderr)).toHaveLength(1);
      expect(r.stderr.trim()).toMatch(pattern);
      expect(r.stdout).toBe("");
    });
  });

  describe("run", () => {
    let workspace: string;
    beforeAll(async () => {
      workspace = path.join(home.root, "ws-run");
      await mkdir(path.join(workspace, "sub"), { recursive: true });
      await writeFile(path.join(workspace, "in.txt"), "from the host\n");
      await writeFile(path.join(workspace, "del.txt"), "delete me\n");
      await writeFile(path.join(workspace, "sub", "keep.txt"), "untouched\n");
    });

    it("syncs in, streams output, syncs changes back, releases, and exits with the command's code", async () => {
      const r = await cli(["run", ...P, "--workspace", workspace, "--timings", "--", "sh", "-c", "cat in.txt; echo made > new.txt; rm del.txt; echo to-stderr >&2; exit 7"]);
      expect(r.code).toBe(7);
      expect(r.stdout).toBe("from the host\n");
      expect(r.stderr).toContain("to-stderr");
      expect(r.stderr).toMatch(/timings:\n(.*\n)*\s+acquire\s+[\d.]+ m?s\n(.*\n)*\s+execute\s+[\d.]+ m?s\n(.*\n)*\s+total\s+/);
      expect(await readFile(path.join(workspace, "new.txt"), "utf8")).toBe("made\n");
      expect(existsSync(path.join(workspace, "del.txt"))).toBe(false);
      expect(await readFile(path.join(workspace, "sub", "keep.txt"), "utf8")).toBe("untouched\n");
      const rows = await leases();
      expect(rows.at(-1)!.state).toBe("released");
      expect(JSON.stringify(rows)).not.toContain("from the host");
    });

    it("quiet on a non-TTY: no progress output when the command prints nothing", async () => {
      const r = await cli(["run", ...P, "--workspace", workspace, "--", "true"]);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe("");
      expect(r.stderr).toBe("");
    });

    it("--reuse resumes the lease kept by the previous --reuse run", async () => {
      const first = await cli(["run", ...P, "--workspace", workspace, "--reuse", "--", "true"]);
      expect(first.code).toBe(0);
      const idle = (await leases(false)).filter((l) => l.state === "idle");
      expect(idle).toHaveLength(1);
      const second = await cli(["run", ...P, "--workspace", workspace, "--reuse", "--", "true"]);
      expect(second.code).toBe(0);
      expect(second.stderr).toContain(`resumed reusable lease ${idle[0]!.providerLeaseId}`);
      const gc = await cli(["leases", "gc", "--provider", "fake-plugin", "--db", home.db, "--include-idle"]);
      expect(gc.code).toBe(0);
      expect(gc.stdout).toMatch(/destroyed\s+fake-plugin\s+fake-/);
      expect((await leases(false)).length).toBe(0);
      expect(existsSync(path.join(os.tmpdir(), `paperclip-fake-plugin-${process.getuid!()}`, idle[0]!.providerLeaseId!))).toBe(false);
    });

    it("SIGINT releases with cancelActiveWork, leaves nothing running and exits 130", async () => {
      const sleep = uniqueSleep();
      const running = startCli(["run", ...P, "--workspace", workspace, "--", "sh", "-c", `echo ready; exec ${sleep.join(" ")}`], { env: home.env });
      await waitFor(() => running.stdout().includes("ready"), 30_000, "the command to start");
      expect(pidsWithArgv(sleep)).toHaveLength(1);
      running.child.kill("SIGINT");
      const r = await running.done;
      expect(r.code).toBe(130);
      expect(r.stderr).toContain("SIGINT received");
      expect(pidsWithArgv(sleep)).toEqual([]);
      expect((await leases()).at(-1)!.state).toBe("released");
    });
  });

  describe("crash mid-run, then leases gc", () => {
    it("destroys the lease a SIGKILLed CLI and worker left behind", async () => {
      const workspace = path.join(home.root, "ws-crash");
      await mkdir(workspace, { recursive: true });
      const sleep = uniqueSleep();
      const cliTmp = path.join(home.root, "crash-tmp");
      await mkdir(cliTmp);
      const running = startCli(["run", ...P, "--workspace", workspace, "--", "sh", "-c", `echo ready; exec ${sleep.join(" ")}`], {
        env: { ...home.env, TMPDIR: cliTmp },
      });
      await waitFor(() => running.stdout().includes("ready"), 30_000, "the command to start");
      const cliPid = running.child.pid!;
      const workers = childPids(cliPid);
      expect(workers.length).toBeGreaterThan(0);
      for (const pid of [cliPid, ...workers]) process.kill(pid, "SIGKILL");
      await running.done;
      await waitFor(() => workers.every((pid) => !processAlive(pid)), 5_000, "the worker to die");

      const before = await leases(false);
      expect(before).toHaveLength(1);
      expect(before[0]!.state).toBe("active");
      const leaseDir = path.join(os.tmpdir(), `paperclip-fake-plugin-${process.getuid!()}`, before[0]!.providerLeaseId!);
      expect(existsSync(leaseDir)).toBe(true);

      const dry = await cli(["leases", "gc", "--provider", "fake-plugin", "--db", home.db, "--dry-run"]);
      expect(dry.stdout).toMatch(/would destroy\s+fake-plugin/);
      expect(existsSync(leaseDir)).toBe(true);

      const gc = await cli(["leases", "gc", "--provider", "fake-plugin", "--db", home.db]);
      expect(gc.code).toBe(0);
      expect(gc.stdout).toMatch(/destroyed\s+fake-plugin\s+fake-\S+\s+db\s+owner pid \d+ is gone/);
      expect(await leases(false)).toEqual([]);
      expect(existsSync(leaseDir)).toBe(false);
      // The crashed worker's command is ended by the new worker's destroy, not left running.
      expect(pidsWithArgv(sleep)).toEqual([]);
      // Nor does the crashed CLI leave a sync staging directory behind.
      expect(readdirSync(cliTmp)).toEqual([]);
    });
  });

  describe("bench", () => {
    it("with reuse disabled: warm UNVERIFIED, exit 2, report 0600 with raw samples and a chart", async () => {
      const out = path.join(home.root, "bench-fake.json");
      const r = await cli(["bench", ...P, "--samples", "5", "--sync-samples", "1", "--sync-size-mb", "1", "--set", "reuseLease=false", "--out", out]);
      expect(r.code).toBe(2);
      expect(r.stdout).toMatch(/bench fake-plugin: UNVERIFIED/);
      expect(r.stdout).toMatch(/warm acquisition \(resume\)\s+0\/5\s+-\s+-\s+-\s+.*UNVERIFIED/);
      expect(r.stdout).toMatch(/cold acquisition\s+5\/5\s+.*PASS/);
      expect(r.stdout).toMatch(/kubernetes fallback: not recommended/);
      expect(statSync(out).mode & 0o777).toBe(0o600);
      const svg = out.replace(/\.json$/, ".svg");
      expect(statSync(svg).mode & 0o777).toBe(0o600);
      expect(readFileSync(svg, "utf8")).toMatch(/^<svg /);
      const report = JSON.parse(readFileSync(out, "utf8")) as {
        verdict: string;
        metrics: Record<string, { verdict: string; samples: { outcome: string; ms: number | null }[] }>;
        syncThroughput: { inMBps: number | null };
        recommendation: { kubernetesFallback: { recommended: boolean } };
      };
      expect(report.verdict).toBe("UNVERIFIED");
      expect(report.metrics.warmAcquire!.verdict).toBe("UNVERIFIED");
      expect(report.metrics.warmAcquire!.samples.every((s) => s.outcome === "unverifiable")).toBe(true);
      expect(report.metrics.coldAcquire!.samples).toHaveLength(5);
      expect(report.syncThroughput.inMBps).toBeGreaterThan(0);
      expect(report.recommendation.kubernetesFallback.recommended).toBe(false);
      expect(await leases(false)).toEqual([]);
    });

    it("a probe command that is not found is UNVERIFIED, never PASS; --json prints the report", async () => {
      const out = path.join(home.root, "bench-127.json");
      const r = await cli(["bench", ...P, "--samples", "3", "--sync-samples", "0", "--json", "--out", out, "--", "definitely-not-a-command-xyz"]);
      expect(r.code).toBe(2);
      const report = JSON.parse(r.stdout) as { metrics: Record<string, { verdict: string; reasons: string[] }> };
      expect(report.metrics.coldFirstCommand!.verdict).toBe("UNVERIFIED");
      expect(report.metrics.coldFirstCommand!.reasons[0]).toMatch(/exit 127/);
      expect(report.metrics.steadyCommand!.verdict).toBe("UNVERIFIED");
    });

    it("a failing provider FAILs and records the Kubernetes fallback recommendation", async () => {
      const out = path.join(home.root, "bench-fail.json");
      const r = await cli(["bench", ...P, "--samples", "3", "--sync-samples", "0", "--set", "acquireFailure=quota exceeded", "--out", out]);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/kubernetes fallback: RECOMMENDED \(two consecutive cold acquisition failures/);
      const report = JSON.parse(readFileSync(out, "utf8")) as { metrics: { coldAcquire: { samples: { note?: string }[] } } };
      expect(report.metrics.coldAcquire.samples[0]!.note).toMatch(/quota exceeded/);
    });
  });
});
