// The boxd seed's live-test list, one test per item. By default against the boxd emulator on
// loopback (its clocks 100x faster); with BOXD_LIVE_TEST=1 and BOXD_API_KEY against boxd.sh:
//   BOXD_LIVE_TEST=1 BOXD_API_KEY=bxd_... npx vitest run providers/boxd/src/lifecycle.test.ts
// Optional live settings: BOXD_ORG, BOXD_API_URL, BOXD_EXCHANGE_URL. Machines are billed while the
// list runs; every one it makes is deleted, and the last test checks that none is left.
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginContext, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { startSetupSession } from "@paperclip-sandbox/conformance";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, type BoxdEmulatorControl } from "@paperclip-sandbox/emulator-boxd";
import { createBoxdPlugin, type BoxdInspection } from "./plugin.js";
import { createBoxdRunner } from "./transport.js";
import type { BoxdApi } from "./api.js";

const LIVE = process.env.BOXD_LIVE_TEST === "1";
const LIVE_KEY = process.env.BOXD_API_KEY;
const SKIP_LIVE = LIVE && !LIVE_KEY;

if (SKIP_LIVE) {
  const reason = "boxd live tests skipped: BOXD_LIVE_TEST=1 needs BOXD_API_KEY (a boxd API key, bxd_...)";
  console.log(reason);
  describe("boxd live-test list", () => it.skip(reason, () => undefined));
} else {
  if (!LIVE) console.log("boxd live-test list: against the emulator (set BOXD_LIVE_TEST=1 and BOXD_API_KEY=bxd_... to run it against boxd.sh)");
  describeList();
}

function describeList() {
  const mode = LIVE ? "boxd.sh" : "emulator";
  /** Generous per-test budget live (machines boot in ~1.5 s there), tighter locally. */
  const T = LIVE ? 300_000 : 60_000;

  let emu: RunningEmulator | undefined;
  let control: BoxdEmulatorControl | undefined;
  let config: Record<string, unknown>;
  let reuseConfig: Record<string, unknown>;
  const boxd = createBoxdPlugin({ env: {} });
  const hooks = boxd.plugin.definition as Required<typeof boxd.plugin.definition> & {
    onEnvironmentStopLease(params: unknown): Promise<unknown>;
    onEnvironmentInspectLease(params: unknown): Promise<BoxdInspection>;
  };
  const tag = randomBytes(4).toString("hex");
  const scope = { driverKey: "boxd", companyId: `pc-test-co-${tag}`, environmentId: `pc-test-env-${tag}` };
  const made = new Set<string>();
  const snapshots = new Set<string>();
  let api: BoxdApi;

  beforeAll(async () => {
    if (LIVE) {
      config = {
        apiKey: LIVE_KEY!,
        ...(process.env.BOXD_ORG ? { org: process.env.BOXD_ORG } : {}),
        ...(process.env.BOXD_API_URL ? { apiUrl: process.env.BOXD_API_URL } : {}),
        ...(process.env.BOXD_EXCHANGE_URL ? { exchangeUrl: process.env.BOXD_EXCHANGE_URL } : {}),
        namePrefix: "pc-live",
        timeoutMs: 120_000,
      };
    } else {
      // boxd's timers 100x faster: the probe's 15-minute delete timer fires after 9 s.
      emu = await runEmulator(emulator, { options: { timeScale: 100, expose: (c) => (control = c) } });
      config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, exchangeUrl: emu.endpoints.exchange!, timeoutMs: 60_000 };
    }
    reuseConfig = { ...config, reuseLease: true };
    await hooks.setup({ execution: { log: () => undefined }, logger: { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } } as unknown as PluginContext);
    api = boxd.apiOf(boxd.definition.config.parse(config));
  });

  afterAll(async () => {
    for (const id of made) await hooks.onEnvironmentDestroyLease({ ...scope, config, providerLeaseId: id, leaseMetadata: {} }).catch(() => undefined);
    for (const name of snapshots) await api?.deleteSnapshot(name).catch(() => undefined);
    await hooks.onShutdown?.();
    await emu?.close();
  });

  const runId = () => `run-${randomBytes(6).toString("hex")}`;
  async function acquire(cfg = config, extra: Record<string, unknown> = {}): Promise<PluginEnvironmentLease> {
    const reuse = cfg.reuseLease === true ? { agentId: "agent-1", executionWorkspaceId: `ws-${randomBytes(4).toString("hex")}` } : {};
    const lease = await hooks.onEnvironmentAcquireLease({ ...scope, config: cfg, runId: runId(), ...reuse, ...extra });
    if (lease.providerLeaseId) made.add(lease.providerLeaseId);
    return lease;
  }
  const sh = (lease: PluginEnvironmentLease, command: string, opts: { stdin?: string; env?: Record<string, string>; timeoutMs?: number; args?: string[]; cfg?: Record<string, unknown> } = {}) =>
    hooks.onEnvironmentExecute({
      ...scope,
      config: opts.cfg ?? config,
      lease,
      command: "sh",
      args: ["-c", command, "sh", ...(opts.args ?? [])],
      ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
      ...(opts.env ? { env: opts.env } : {}),
      ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}),
    });
  const release = (lease: PluginEnvironmentLease, cfg = config, extra: Record<string, unknown> = {}) =>
    hooks.onEnvironmentReleaseLease({ ...scope, config: cfg, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata, ...extra });
  const destroy = async (lease: PluginEnvironmentLease, cfg = config) => {
    const receipt = await hooks.onEnvironmentDestroyLease({ ...scope, config: cfg, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    made.delete(lease.providerLeaseId!);
    return receipt;
  };
  const resume = (lease: PluginEnvironmentLease, cfg = config) => hooks.onEnvironmentResumeLease({ ...scope, config: cfg, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
  const inspect = (lease: PluginEnvironmentLease, cfg = config) => hooks.onEnvironmentInspectLease({ ...scope, config: cfg, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  const status = async (id: string) => (await api.getMachine(id))?.status ?? "gone";
  const sha = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** A counter a background process bumps every 100 ms, and its pid, under $HOME. */
  const START_COUNTER = `nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > "$HOME/count.tmp" && mv "$HOME/count.tmp" "$HOME/count"; sleep 0.1; done' >/dev/null 2>&1 </dev/null & echo $! > "$HOME/counter.pid"`;
  const COUNTER_ALIVE = `kill -0 "$(cat "$HOME/counter.pid")" && cat "$HOME/count"`;

  it(`[${mode}] validation, and a sized probe that deletes its machine; a bad key fails the probe`, { timeout: T }, async () => {
    const invalid = await hooks.onEnvironmentValidateConfig({ driverKey: "boxd", config: { ...config, vcpu: 3 } });
    expect(invalid).toMatchObject({ ok: false, errors: [expect.stringMatching(/^vCPUs: must be one of 1, 2, 4, 8/)] });
    const both = await hooks.onEnvironmentValidateConfig({ driverKey: "boxd", config: { ...config, vcpu: 2, snapshot: "base" } });
    expect(both.errors?.[0]).toMatch(/^vCPUs: cannot be combined with Snapshot/);
    expect((await hooks.onEnvironmentValidateConfig({ driverKey: "boxd", config: { ...config, vcpu: 4 } })).ok).toBe(true);

    const before = LIVE ? 0 : emu!.requests.count({ route: "/boxd.api.v1.BoxdApi/SetAutoDestroyTimeout" });
    const probe = await hooks.onEnvironmentProbe({ ...scope, config: { ...config, vcpu: 4 } });
    expect(probe.ok, probe.summary).toBe(true);
    expect(probe.diagnostics?.map((d) => d.code)).toEqual(expect.arrayContaining(["PROBE_CREATE_OK", "PROBE_EXEC_OK", "PROBE_DESTROY_OK", "BOXD_SIZE"]));
    expect(probe.diagnostics?.find((d) => d.code === "BOXD_SIZE")?.message).toBe("machines have 4 vCPU and 16 GiB");
    // The probe's machine got its 15-minute delete timer, and is gone.
    if (!LIVE) expect(emu!.requests.count({ route: "/boxd.api.v1.BoxdApi/SetAutoDestroyTimeout" })).toBe(before + 1);
    expect(await api.listMachines({ labels: { "paperclip-environment": scope.environmentId } })).toEqual([]);

    const bad = await hooks.onEnvironmentProbe({ ...scope, config: { ...config, apiKey: `bxd_${"0".repeat(40)}` } });
    expect(bad.ok).toBe(false);
    expect(bad.summary).toMatch(/^boxd sandbox not usable — boxd exchangeApiKey failed: HTTP 401/);
    expect(JSON.stringify(bad)).not.toContain("0".repeat(40));
  });

  it(`[${mode}] every machine is labelled, isolated and in the org; the key never enters it`, { timeout: T }, async () => {
    const lease = await acquire();
    const machine = await api.getMachine(lease.providerLeaseId!);
    expect(machine?.labels).toMatchObject({ "paperclip-provider": "boxd", "paperclip-environment": scope.environmentId, "paperclip-company": scope.companyId });
    expect(machine?.labels["paperclip-run"]).toMatch(/^run-/);
    expect(machine?.isolated).toBe(true);
    expect(machine?.org).toBe(LIVE ? (process.env.BOXD_ORG ?? machine?.org) : "personal");
    expect(lease.metadata).toMatchObject({ account: LIVE ? expect.any(String) : "paperclip-e2e", machineName: machine?.name });
    // Isolated: no in-VM boxd CLI. The key and its token are nowhere in the machine's processes.
    const look = await sh(lease, "command -v boxd || echo no-boxd-cli; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'; env");
    expect(look.stdout).toContain("no-boxd-cli");
    expect(look.stdout).not.toContain(String(config.apiKey));
    expect(look.stdout).not.toMatch(/bxd_|Bearer |eyJhbGci/);
    if (!LIVE) {
      // A key fenced to one org cannot make machines in another.
      await expect(acquire({ ...config, org: "someone-elses-org" })).rejects.toThrow(/boxd CreateVm failed: .*permission_denied.*this API key is fenced to org personal, not someone-elses-org/);
    }
    await destroy(lease);
  });

  it(`[${mode}] stdin, env, quoting, exit code and stderr; the staged stdin file is removed`, { timeout: T }, async () => {
    const lease = await acquire();
    const big = `${"x".repeat(40 * 1024)}\nend\n`; // over the inline limit: staged through WriteFile
    const script = 'printf "%s|" "$@"; echo; echo "FOO=$FOO"; wc -c | tr -d " "; echo oops >&2; exit 7';
    const args = ["a b", "c'd", "$HOME", "`x`", "line\nbreak"];
    const marks = LIVE ? 0 : emu!.requests.mark();
    const result = await sh(lease, script, { stdin: big, env: { FOO: "bar baz 'q'" }, args });
    expect(result).toMatchObject({ exitCode: 7, timedOut: false, stderr: "oops\n" });
    expect(result.stdout).toBe(`a b|c'd|$HOME|\`x\`|line\nbreak|\nFOO=bar baz 'q'\n${Buffer.byteLength(big)}\n`);
    if (!LIVE) expect(emu!.requests.list({ since: marks }).map((r) => r.path.split("/").pop())).toEqual(["WriteFile", "Exec"]);
    const small = await sh(lease, "cat; echo; echo $#", { stdin: "small stdin", args: ["1", "2"] });
    expect(small).toMatchObject({ exitCode: 0, stdout: "small stdin\n2\n" });
    const left = await sh(lease, "ls -A /tmp | grep -c paperclip-stdin || true");
    expect(left.stdout.trim()).toBe("0");
    await destroy(lease);
  });

  it(`[${mode}] empty stdin ends at once; a staged stdin file is mode 0600 (0700 directory on older agents)`, { timeout: T }, async () => {
    const lease = await acquire();
    expect(await sh(lease, "wc -c < /dev/stdin", { stdin: "" })).toMatchObject({ exitCode: 0, stdout: "0\n" });
    const target = { api, id: lease.providerLeaseId!, agent: { legacy: false } };
    const big = Buffer.alloc(64 * 1024, 0x61);
    const probe = `stat -L -c '%a %s' /proc/self/fd/0; ls -ld "$(dirname "$(readlink /proc/self/fd/0)")" 2>/dev/null | cut -c1-10`;
    const out: Buffer[] = [];
    expect((await createBoxdRunner(target).run(probe, { stdin: big, stdout: (c) => out.push(c) })).exitCode).toBe(0);
    expect(Buffer.concat(out).toString().split("\n")[0]).toBe(`600 ${big.length}`);
    if (!LIVE) {
      // An agent older than the file API: the old upload (0644) inside a fresh 0700 directory.
      control!.setLegacyAgent(lease.providerLeaseId!, true);
      const legacy = { api, id: lease.providerLeaseId!, agent: { legacy: false } };
      const lines: Buffer[] = [];
      const marks = emu!.requests.mark();
      const exit = await createBoxdRunner(legacy).run(`stat -c '%a' "$(dirname "$(readlink /proc/self/fd/0)")" 2>/dev/null || echo dir-removed; stat -L -c '%a %s' /proc/self/fd/0`, {
        stdin: big,
        stdout: (c) => lines.push(c),
      });
      expect(exit.exitCode).toBe(0);
      expect(Buffer.concat(lines).toString()).toBe(`dir-removed\n644 ${big.length}\n`);
      expect(legacy.agent.legacy).toBe(true);
      expect(emu!.requests.list({ since: marks }).map((r) => `${r.path.split("/").pop()} ${r.code}`)).toEqual(["WriteFile UNIMPLEMENTED", "Exec OK", "UploadFileStream OK", "Exec OK"]);
      expect((await sh(lease, "ls -A /tmp | grep -c paperclip-stdin || true")).stdout.trim()).toBe("0");
    }
    await destroy(lease);
  });

  it(`[${mode}] a 5 MiB round trip (sync in, sync out) arrives unchanged`, { timeout: T }, async () => {
    const lease = await acquire();
    const dir = await mkdtemp(join(tmpdir(), "boxd-sync-"));
    try {
      const bytes = randomBytes(5 * 1024 * 1024);
      await writeFile(join(dir, "in.bin"), bytes);
      const remote = `${lease.metadata!.remoteCwd}/big/in.bin`;
      const base = { ...scope, config, lease };
      await hooks.onEnvironmentSyncIn({ ...base, operations: [{ operationId: "in", files: [{ sourcePath: join(dir, "in.bin"), targetPath: remote, kind: "file" }] }] });
      expect((await sh(lease, `sha256sum '${remote}' | cut -d' ' -f1`)).stdout.trim()).toBe(sha(bytes));
      await hooks.onEnvironmentSyncOut({ ...base, operations: [{ operationId: "out", files: [{ sourcePath: remote, targetPath: join(dir, "out.bin"), kind: "file" }] }] });
      expect(sha(await readFile(join(dir, "out.bin")))).toBe(sha(bytes));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    await destroy(lease);
  });

  it(`[${mode}] a timeout ends the command's remote processes`, { timeout: T }, async () => {
    const lease = await acquire();
    const started = Date.now();
    const result = await sh(lease, 'sleep 300 & echo $! > "$HOME/bg.pid"; sh -c "sleep 300" & echo $! > "$HOME/bg2.pid"; echo started; wait', { timeoutMs: 1_500 });
    expect(result).toMatchObject({ timedOut: true, exitCode: null, stdout: "started\n" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    const after = await sh(lease, 'for f in bg.pid bg2.pid; do kill -0 "$(cat "$HOME/$f")" 2>/dev/null && echo alive || echo gone; done');
    expect(after.stdout).toBe("gone\ngone\n");
    await destroy(lease);
  });

  it(`[${mode}] suspend at release and resume keep a file and a running process`, { timeout: T }, async () => {
    const lease = await acquire(reuseConfig);
    expect((await sh(lease, `echo kept > "$HOME/note" && ${START_COUNTER}`, { cfg: reuseConfig })).exitCode).toBe(0);
    await sleep(300);
    expect(await release(lease, reuseConfig)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect(await status(lease.providerLeaseId!)).toBe("suspended");
    const resumed = await resume(lease, reuseConfig);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect(await status(lease.providerLeaseId!)).toBe("running");
    const first = await sh(resumed, `cat "$HOME/note"; ${COUNTER_ALIVE}`, { cfg: reuseConfig });
    expect(first.exitCode, first.stderr).toBe(0);
    const [note, count] = first.stdout.trim().split("\n");
    expect(note).toBe("kept");
    await sleep(400);
    const later = Number((await sh(resumed, COUNTER_ALIVE, { cfg: reuseConfig })).stdout.trim());
    expect(later).toBeGreaterThan(Number(count));
    await destroy(resumed, reuseConfig);
  });

  it(`[${mode}] a cold stop and resume keep the file (processes end)`, { timeout: T }, async () => {
    const lease = await acquire(reuseConfig);
    await sh(lease, `echo on-disk > "$HOME/note" && ${START_COUNTER}`, { cfg: reuseConfig });
    expect(await hooks.onEnvironmentStopLease({ ...scope, config: reuseConfig, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })).toEqual({
      providerLeaseId: lease.providerLeaseId,
      state: "stopped",
    });
    expect(await status(lease.providerLeaseId!)).toBe("stopped");
    const resumed = await resume(lease, reuseConfig);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    const after = await sh(resumed, `cat "$HOME/note"; kill -0 "$(cat "$HOME/counter.pid")" 2>/dev/null && echo alive || echo ended`, { cfg: reuseConfig });
    expect(after.stdout).toBe("on-disk\nended\n");
    await destroy(resumed, reuseConfig);
  });

  it(`[${mode}] inspect reports each state without changing it`, { timeout: T }, async () => {
    const lease = await acquire(reuseConfig);
    const twice = async (expected: string) => {
      expect((await inspect(lease, reuseConfig)).state).toBe(expected);
      expect((await inspect(lease, reuseConfig)).state).toBe(expected);
      expect(await status(lease.providerLeaseId!)).toBe(expected);
    };
    await twice("running");
    await release(lease, reuseConfig);
    await twice("suspended");
    await api.hibernateMachine(lease.providerLeaseId!);
    await twice("hibernated");
    await resume(lease, reuseConfig);
    await twice("running");
    await hooks.onEnvironmentStopLease({ ...scope, config: reuseConfig, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    await twice("stopped");
    await destroy(lease, reuseConfig);
    expect(await inspect(lease, reuseConfig)).toMatchObject({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
  });

  it(`[${mode}] a command on a stopped machine starts it and runs once more`, { timeout: T }, async () => {
    const lease = await acquire();
    await api.stopMachine(lease.providerLeaseId!);
    expect(await status(lease.providerLeaseId!)).toBe("stopped");
    const marks = LIVE ? 0 : emu!.requests.mark();
    expect(await sh(lease, "echo ran")).toMatchObject({ exitCode: 0, stdout: "ran\n" });
    expect(await status(lease.providerLeaseId!)).toBe("running");
    if (!LIVE) {
      const calls = emu!.requests.list({ since: marks }).map((r) => `${r.path.split("/").pop()} ${r.code}`);
      expect(calls[0]).toBe("Exec FAILED_PRECONDITION");
      expect(calls).toContain("StartVm OK");
      expect(calls.filter((c) => c === "Exec OK")).toHaveLength(1);
    }
    // Suspended and hibernated machines wake on a command (boxd wakes them).
    await api.suspendMachine(lease.providerLeaseId!);
    expect((await sh(lease, "echo woke")).stdout).toBe("woke\n");
    await api.hibernateMachine(lease.providerLeaseId!);
    expect((await sh(lease, "echo woke again")).stdout).toBe("woke again\n");
    await destroy(lease);
  });

  it(`[${mode}] a hibernated lease resumes with its process, and stops cold`, { timeout: T }, async () => {
    const lease = await acquire(reuseConfig);
    await sh(lease, START_COUNTER, { cfg: reuseConfig });
    await release(lease, reuseConfig);
    await api.hibernateMachine(lease.providerLeaseId!);
    expect(await status(lease.providerLeaseId!)).toBe("hibernated");
    const resumed = await resume(lease, reuseConfig);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect((await sh(resumed, COUNTER_ALIVE, { cfg: reuseConfig })).exitCode).toBe(0);
    await api.hibernateMachine(lease.providerLeaseId!);
    expect(await hooks.onEnvironmentStopLease({ ...scope, config: reuseConfig, providerLeaseId: lease.providerLeaseId, leaseMetadata: resumed.metadata })).toEqual({
      providerLeaseId: lease.providerLeaseId,
      state: "stopped",
    });
    expect(await status(lease.providerLeaseId!)).toBe("stopped");
    await destroy(resumed, reuseConfig);
  });

  it(`[${mode}] release with cancelActiveWork ends work and stops; stop_and_retain keeps the disk`, { timeout: T }, async () => {
    const lease = await acquire(reuseConfig);
    const running = sh(lease, "echo going; sleep 300", { cfg: reuseConfig });
    await sleep(500);
    const receipt = await release(lease, reuseConfig, { cancelActiveWork: true });
    expect(receipt).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect((await running).exitCode).toBeNull();
    expect(await status(lease.providerLeaseId!)).toBe("stopped");
    await destroy(lease, reuseConfig);

    const plain = await acquire();
    await sh(plain, 'echo retained > "$HOME/note"');
    expect(await release(plain, config, { resourceDisposition: "stop_and_retain" })).toEqual({ providerLeaseId: plain.providerLeaseId, state: "stopped" });
    expect(await status(plain.providerLeaseId!)).toBe("stopped");
    const back = await resume(plain);
    expect((await sh(back, 'cat "$HOME/note"')).stdout).toBe("retained\n");
    await destroy(back);
  });

  it(`[${mode}] release without reuse deletes, answering once boxd no longer lists the machine`, { timeout: T }, async () => {
    const lease = await acquire();
    expect(await release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    made.delete(lease.providerLeaseId!);
    expect(await api.getMachine(lease.providerLeaseId!)).toBeNull();
    expect((await api.listMachines({ labels: { "paperclip-environment": scope.environmentId } })).map((m) => m.id)).not.toContain(lease.providerLeaseId);
  });

  it(`[${mode}] a requested expiry is enforced by boxd's delete timer`, { timeout: T }, async () => {
    const requested = new Date(Date.now() + (LIVE ? 40_000 : 120_000));
    const lease = await acquire(config, { requestedExpiresAt: requested.toISOString() });
    expect(lease.expiresAt).toBeTruthy();
    expect(Date.parse(lease.expiresAt!)).toBeLessThanOrEqual(requested.getTime());
    const machine = await api.getMachine(lease.providerLeaseId!);
    expect(machine?.destroyAt?.getTime()).toBeLessThanOrEqual(requested.getTime());
    // Live: real seconds; the emulator: boxd's clock 100x faster (2 minutes of boxd time is 1.2 s).
    const deadline = Date.now() + (LIVE ? 90_000 : 20_000);
    while ((await api.getMachine(lease.providerLeaseId!)) && Date.now() < deadline) await sleep(250);
    expect(await api.getMachine(lease.providerLeaseId!)).toBeNull();
    made.delete(lease.providerLeaseId!);
    expect(await resume(lease)).toEqual({ providerLeaseId: null, metadata: { expired: true } });
  });

  it(`[${mode}] a machine restored from a snapshot has its disk and size; a sized machine has its size`, { timeout: T }, async () => {
    const sized = await acquire({ ...config, vcpu: 4 });
    expect(await api.getMachine(sized.providerLeaseId!)).toMatchObject({ vcpu: 4, memoryBytes: 16 * 1024 ** 3 });
    await sh(sized, 'echo from-snapshot > "$HOME/snap-note"', { cfg: { ...config, vcpu: 4 } });
    const name = `pc-test-${tag}-snap`;
    snapshots.add(name);
    await api.createSnapshot(sized.providerLeaseId!, name);
    const deadline = Date.now() + (LIVE ? 120_000 : 20_000);
    while ((await api.getSnapshot(name))?.status !== "ready" && Date.now() < deadline) await sleep(250);
    expect(await api.getSnapshot(name)).toMatchObject({ status: "ready", vcpu: 4 });
    await destroy(sized, { ...config, vcpu: 4 });

    const restoredConfig = { ...config, snapshot: name };
    const restored = await acquire(restoredConfig);
    expect((await sh(restored, 'cat "$HOME/snap-note"', { cfg: restoredConfig })).stdout).toBe("from-snapshot\n");
    expect(await api.getMachine(restored.providerLeaseId!)).toMatchObject({ vcpu: 4 });
    await destroy(restored, restoredConfig);
    await api.deleteSnapshot(name);
    snapshots.delete(name);
  });

  it(`[${mode}] a custom image: setup, capture as a snapshot, a run from it has the file and its size, delete removes it`, { timeout: T }, async () => {
    const sized = { ...config, vcpu: 4 };
    const { session, lease: setup } = await startSetupSession(hooks, { ...scope, config: sized });
    made.add(session.providerLeaseId!);
    expect((await sh(setup, 'echo from-template > "$HOME/tpl-note"', { cfg: sized })).exitCode).toBe(0);
    const captured = await hooks.onEnvironmentCaptureTemplate({
      ...scope,
      config: sized,
      providerLeaseId: session.providerLeaseId,
      setupMetadata: session.metadata,
      timeoutMs: LIVE ? 240_000 : 30_000,
    });
    snapshots.add(captured.templateRef);
    expect(await api.getSnapshot(captured.templateRef)).toMatchObject({ status: "ready", vcpu: 4 });
    await hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config: sized, providerLeaseId: session.providerLeaseId, reason: "promoted" });
    made.delete(session.providerLeaseId!);

    const bound = { ...sized, templateRef: captured.templateRef };
    const run = await acquire(bound);
    expect((await sh(run, 'cat "$HOME/tpl-note"', { cfg: bound })).stdout).toBe("from-template\n");
    expect(await api.getMachine(run.providerLeaseId!)).toMatchObject({ vcpu: 4 });
    await destroy(run, bound);
    expect(await hooks.onEnvironmentDeleteTemplate({ ...scope, config, templateRef: captured.templateRef, reason: "disabled" })).toEqual({ deleted: true });
    expect(await api.getSnapshot(captured.templateRef)).toBeNull();
    snapshots.delete(captured.templateRef);
  });

  it(`[${mode}] resume after destroy is an expired lease`, { timeout: T }, async () => {
    const lease = await acquire(reuseConfig);
    expect(await destroy(lease, reuseConfig)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(await resume(lease, reuseConfig)).toEqual({ providerLeaseId: null, metadata: { expired: true } });
  });

  it(`[${mode}] nothing is left`, { timeout: T }, async () => {
    expect(made.size, `leases still held: ${[...made].join(", ")}`).toBe(0);
    expect(await api.listMachines({ labels: { "paperclip-environment": scope.environmentId } })).toEqual([]);
    for (const name of snapshots) expect(await api.getSnapshot(name)).toBeNull();
    if (!LIVE) expect(await emu!.leftovers()).toEqual([]);
  });
}
