// Pod exec and sync beyond the conformance suite: the v4 protocol (no half-close: stdin framed,
// streaming sync still works), a script larger than a URL allows, a hostile pod's archive refused
// with nothing written outside, the job backend's limits reported, and kubectl reading the lease's pod.
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { COMMAND_CHANNEL_SWITCH, syncOut, withInlineEnv } from "@paperclip-sandbox/kit";
import { acquire, scope, startPlugin, startTestCluster, type TestCluster } from "./__fixtures__/cluster.js";
import { createClientPool } from "./kube.js";
import { kubernetesConfig } from "./config.js";
import { podRunner } from "./runners.js";

const run = promisify(execFile);
let host: string;
beforeAll(async () => {
  host = await mkdtemp(path.join(tmpdir(), "k8s-sync-test-"));
});
afterAll(() => rm(host, { recursive: true, force: true }));

describe("exec over v4.channel.k8s.io (a cluster before 1.30)", () => {
  let t: TestCluster;
  beforeAll(async () => {
    t = await startTestCluster({ execProtocols: ["v4.channel.k8s.io"] });
  });
  afterAll(() => t.close());

  it("stdin is length-framed so commands see EOF, and streaming sync still round-trips", async () => {
    const { hooks } = await startPlugin();
    const a = await acquire(hooks, t.config);
    const cat = await a.exec("sh", ["-c", "wc -c; cat >/dev/null; echo eof"], { stdin: "x".repeat(100_000) });
    expect(cat).toMatchObject({ exitCode: 0, stdout: "100000\neof\n" });
    const src = path.join(host, "v4-in");
    await mkdir(src, { recursive: true });
    await writeFile(path.join(src, "blob.bin"), Buffer.alloc(3 * 1024 * 1024, 7));
    await hooks.onEnvironmentSyncIn({
      ...scope,
      config: t.config,
      lease: a.lease,
      operations: [{ operationId: "in", files: [{ sourcePath: src, targetPath: "/workspace/v4", kind: "directory" }] }],
    } as never);
    const back = path.join(host, "v4-out");
    await hooks.onEnvironmentSyncOut({
      ...scope,
      config: t.config,
      lease: a.lease,
      operations: [{ operationId: "out", files: [{ sourcePath: "/workspace/v4", targetPath: back, kind: "directory" }] }],
    } as never);
    expect((await readFile(path.join(back, "blob.bin"))).equals(Buffer.alloc(3 * 1024 * 1024, 7))).toBe(true);
    const protocols = t.emu.requests.list({ protocol: "ws" }).map((r) => r.headers["sec-websocket-protocol"]);
    expect(protocols.length).toBeGreaterThan(0);
    await a.release();
  });
});

describe("one cluster (v5)", () => {
  let t: TestCluster;
  beforeAll(async () => {
    t = await startTestCluster();
  });
  afterAll(() => t.close());

  it("a script larger than a URL allows (the host's 47-variable agent env) runs in one exec", async () => {
    // The pod exec path itself (over the command channel the script never goes near a URL).
    const before = process.env[COMMAND_CHANNEL_SWITCH];
    process.env[COMMAND_CHANNEL_SWITCH] = "off";
    onTestFinished(() => {
      if (before === undefined) delete process.env[COMMAND_CHANNEL_SWITCH];
      else process.env[COMMAND_CHANNEL_SWITCH] = before;
    });
    const { hooks } = await startPlugin();
    const a = await acquire(hooks, t.config);
    const env: Record<string, string> = {};
    for (let i = 0; i < 50; i++) env[`PAPERCLIP_VAR_${i}`] = `${i}-${"v".repeat(1_000)}`;
    const mark = t.emu.requests.mark();
    const result = await a.exec("sh", ["-c", 'printf "%s" "$PAPERCLIP_VAR_49" | wc -c; cat'], { env, stdin: "from stdin\n" });
    expect(result).toMatchObject({ exitCode: 0, stdout: "1003\nfrom stdin\n" });
    await t.emu.requests.idle();
    expect(t.emu.requests.list({ since: mark })).toHaveLength(1);
    const path = t.emu.requests.list({ since: mark })[0]!.path;
    expect(path.length).toBeLessThan(200);
    await a.release();
  });

  it("an archive crafted by a hostile pod is refused and nothing lands outside the target", async () => {
    const { hooks } = await startPlugin();
    const a = await acquire(hooks, t.config);
    // A tar whose member climbs out of the target, built here and planted as the pod's `tar`.
    const evil = tarOf([
      { name: "../../outside/pwned", body: "owned" },
      { name: "ok.txt", body: "fine" },
    ]);
    await writeFile(path.join(host, "evil.tar"), evil);
    await hooks.onEnvironmentSyncIn({
      ...scope,
      config: t.config,
      lease: a.lease,
      operations: [{ operationId: "plant", files: [{ sourcePath: path.join(host, "evil.tar"), targetPath: "/workspace/evil/archive.tar", kind: "file" }] }],
    } as never);
    await a.exec("sh", [
      "-c",
      "mkdir -p /workspace/evil/bin /workspace/src && printf '#!/bin/sh\\ncat /workspace/evil/archive.tar\\n' > /workspace/evil/bin/tar && chmod +x /workspace/evil/bin/tar && echo x > /workspace/src/a",
    ]);
    const config = kubernetesConfig.parse(t.config);
    const clients = createClientPool()(config);
    const pod = podRunner(clients, a.namespace, a.name, 60_000);
    // The compromised pod's PATH finds its own tar first.
    const hostile = withInlineEnv({ capabilities: pod.capabilities, run: (script, io) => pod.run(`PATH=/workspace/evil/bin:$PATH\n${script}`, io) });
    const target = path.join(host, "out", "target");
    await mkdir(path.join(host, "outside"), { recursive: true });
    await expect(
      syncOut(hostile, [{ operationId: "hostile", files: [{ sourcePath: "/workspace/src", targetPath: target, kind: "directory" }] }], { roots: ["/workspace"], hostScratchDir: host }),
    ).rejects.toMatchObject({ code: "SYNC_ARCHIVE_UNSAFE" });
    expect(await readdir(path.join(host, "outside"))).toEqual([]);
    await expect(readdir(target)).rejects.toMatchObject({ code: "ENOENT" });
    await a.release();
  });

  it("kubectl --kubeconfig <generated> get pods -n paperclip-<slug> lists a running lease's pod", async () => {
    const { hooks } = await startPlugin();
    const a = await acquire(hooks, t.config);
    const { stdout } = await run("kubectl", ["--kubeconfig", t.emu.credentials.kubeconfigPath!, "get", "pods", "-n", a.namespace]);
    expect(stdout).toMatch(new RegExp(`^NAME\\s+READY\\s+STATUS\\s+RESTARTS\\s+AGE\\n${a.name}\\s+1/1\\s+Running\\s+0\\s+\\d+s\\n`));
    await a.release();
  });

  it("the job backend: its limits are in the lease and every command or sync says so", async () => {
    const { hooks } = await startPlugin();
    const config = { ...t.config, backend: "job", jobCommand: ["/bin/sh", "-c", "echo job ran; sleep 30"] };
    const a = await acquire(hooks, config);
    expect(a.lease.providerLeaseId).toMatch(/^k8s-paperclip-acme-corp\/job\/pc-[0-9a-z]{26}$/);
    expect(a.lease.metadata).toMatchObject({ backend: "job", kind: "Job", apiVersion: "batch/v1", nativeFileSyncUnsupported: true, multiCommandExec: false });
    const job = await t.batch.readNamespacedJob({ namespace: a.namespace, name: a.name });
    expect(job.spec).toMatchObject({ backoffLimit: 0, activeDeadlineSeconds: 3600, ttlSecondsAfterFinished: 900 });
    expect(job.spec?.template.spec?.restartPolicy).toBe("Never");
    await expect(a.exec("echo", ["hi"])).rejects.toThrow(
      /the kubernetes job backend runs no commands: Job paperclip-acme-corp\/pc-[0-9a-z]{26} runs its image's entrypoint once \(state: running\), with no exec and no file sync \(nor a terminal\); use backend sandbox-cr for command execution\. Its log ends: job ran/,
    );
    const sync = await hooks
      .onEnvironmentSyncIn({ ...scope, config, lease: a.lease, operations: [{ operationId: "in", files: [{ sourcePath: host, targetPath: "/workspace/x", kind: "directory" }] }] } as never)
      .catch((e: Error) => e);
    // The host does not call native sync for such a lease (nativeFileSyncUnsupported); a direct call
    // fails at the transport (the kit's SyncError keeps the runner's message only as its cause).
    expect(sync).toBeInstanceOf(Error);
    expect((sync as Error).message).toMatch(/SYNC_TRANSPORT_FAILED/);
    const receipt = await a.release();
    expect(receipt).toMatchObject({ state: "destroyed" });
    expect((await t.emu.leftovers()).filter((e) => e.includes(a.name))).toEqual([]);
  });

  it("leases gc lists this provider's workloads by label across tenant namespaces", async () => {
    const { listLeases } = await import("./index.js");
    const { hooks } = await startPlugin();
    const a = await acquire(hooks, t.config);
    const b = await acquire(hooks, { ...t.config, companySlug: "other-co" });
    const listed = await listLeases(t.config, { env: {} });
    const ids = [a.lease.providerLeaseId, b.lease.providerLeaseId];
    expect(listed.map((l) => l.providerLeaseId)).toEqual(expect.arrayContaining(ids));
    expect(listed.find((l) => l.providerLeaseId === b.lease.providerLeaseId)!.labels).toMatchObject({ "paperclip-provider": "kubernetes", "paperclip-environment": "env-1" });
    await a.release();
    await b.release();
    expect((await listLeases(t.config, { env: {} })).filter((l) => ids.includes(l.providerLeaseId))).toEqual([]);
  });
});

/** A minimal ustar archive (regular files only). */
function tarOf(files: Array<{ name: string; body: string }>): Buffer {
  const blocks: Buffer[] = [];
  for (const f of files) {
    const body = Buffer.from(f.body);
    const header = Buffer.alloc(512);
    header.write(f.name, 0, 100);
    header.write("0000644\0", 100);
    header.write("0001750\0", 108);
    header.write("0001750\0", 116);
    header.write(body.length.toString(8).padStart(11, "0") + "\0", 124);
    header.write(
      Math.floor(Date.now() / 1000)
        .toString(8)
        .padStart(11, "0") + "\0",
      136,
    );
    header.write("        ", 148);
    header.write("0", 156);
    header.write("ustar\0", 257);
    header.write("00", 263);
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    blocks.push(header, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}
