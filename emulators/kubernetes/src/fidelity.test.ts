// Fidelity: the test server driven through @kubernetes/client-node's public API as any client
// would, for the kubelet's semantics a pod spec relies on: emptyDir volumes at any path (shared,
// subPath, read-only), the container's user (runAsUser/runAsGroup, the image's root, runAsNonRoot),
// the image's command rules (command/args over entrypoint/cmd; a missing binary is a StartError;
// exec of a missing binary is the runtime's 500), the working directory, time-based controllers
// on the cluster's clock, listing and watching; then the coverage table of every operation of the
// client's generated APIs.
import { PassThrough } from "node:stream";
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as k8s from "@kubernetes/client-node";
import { coverageReport, coverageTable, createManualClock, runEmulator, withCoverageTable, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { kubernetesSdkOperations, routedBy } from "./__fixtures__/sdk-operations.js";
import { kubernetesCoverage } from "./coverage.js";
import { emulator } from "./index.js";

let emu: RunningEmulator;
let kc: k8s.KubeConfig;
let core: k8s.CoreV1Api;
const NS = "fid";
beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  kc = new k8s.KubeConfig();
  kc.loadFromString(emu.credentials.kubeconfig!);
  core = kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
});
afterAll(() => emu?.close());

type Container = k8s.V1Container;
async function pod(name: string, container: Partial<Container>, spec: Partial<k8s.V1PodSpec> = {}): Promise<void> {
  await core.createNamespacedPod({ namespace: NS, body: { metadata: { name }, spec: { containers: [{ name: "c", image: "img", ...container }], ...spec } } });
}
const read = (name: string) => core.readNamespacedPod({ namespace: NS, name });
const running = (name: string) => vi.waitFor(async () => expect((await read(name)).status?.phase).toBe("Running"), { timeout: 15_000 });

async function exec(name: string, command: string[]): Promise<{ stdout: string; status: k8s.V1Status }> {
  let stdout = "";
  const out = new PassThrough().on("data", (d) => (stdout += d));
  const status = await new Promise<k8s.V1Status>((resolve) => void new k8s.Exec(kc).exec(NS, name, "c", command, out, null, null, false, resolve));
  await vi.waitFor(() => expect(status).toBeTruthy());
  return { stdout, status };
}

describe("emptyDir volumes (the kubelet mounts them anywhere)", () => {
  it("mounts emptyDirs at arbitrary paths, shares one volume between mounts, binds a subPath, honours readOnly", async () => {
    await pod(
      "volumes",
      {
        volumeMounts: [
          { name: "data", mountPath: "/data" },
          { name: "data", mountPath: "/srv/again" },
          { name: "data", mountPath: "/var/lib/part", subPath: "part" },
          { name: "scratch", mountPath: "/home/sandbox/work" },
          { name: "frozen", mountPath: "/opt/ro", readOnly: true },
        ],
      },
      {
        volumes: [
          { name: "data", emptyDir: {} },
          { name: "scratch", emptyDir: { medium: "Memory" } },
          { name: "frozen", emptyDir: {} },
        ],
      },
    );
    await running("volumes");
    const result = await exec("volumes", [
      "sh",
      "-c",
      "echo a > /data/a; cat /srv/again/a; echo b > /var/lib/part/b; cat /data/part/b; touch /home/sandbox/work/w && echo work-ok; touch /opt/ro/x 2>&1 | grep -c Read-only",
    ]);
    expect(result.stdout).toBe("a\nb\nwork-ok\n1\n");
  });

  it("a mount of an undeclared volume is the API server's 422; a volume that is not an emptyDir a CreateContainerError naming the limit", async () => {
    const error = await pod("no-volume", { volumeMounts: [{ name: "ghost", mountPath: "/g" }] }).catch((e) => e);
    expect(error.code).toBe(422);
    expect(JSON.parse(error.body).message).toContain('spec.containers[0].volumeMounts[0].name: Not found: "ghost"');
    await pod("host-path", { volumeMounts: [{ name: "h", mountPath: "/h" }] }, { volumes: [{ name: "h", hostPath: { path: "/etc" } }] });
    await vi.waitFor(async () => expect((await read("host-path")).status?.containerStatuses?.[0]?.state?.waiting?.message).toMatch(/only emptyDir volumes are emulated/));
  });
});

describe("the container's user", () => {
  it("runs as runAsUser/runAsGroup (container over pod); without them as the image's root", async () => {
    await pod("uid-2000", { securityContext: { runAsUser: 2000 } }, { securityContext: { runAsUser: 1000, runAsGroup: 3000 } });
    await pod("as-root", {});
    await Promise.all([running("uid-2000"), running("as-root")]);
    expect((await exec("uid-2000", ["sh", "-c", "id -u; id -g; echo $HOME"])).stdout).toBe("2000\n3000\n/\n");
    expect((await exec("as-root", ["sh", "-c", "id -u; whoami; touch /usr/x 2>&1 | grep -c Read-only"])).stdout).toBe("0\nroot\n1\n");
  });

  it("runAsNonRoot refuses a root container with the kubelet's messages (CreateContainerConfigError)", async () => {
    await pod("nonroot-image", { securityContext: { runAsNonRoot: true } });
    await pod("nonroot-uid0", { securityContext: { runAsNonRoot: true, runAsUser: 0 } });
    const uid = (await read("nonroot-image")).metadata!.uid!;
    await vi.waitFor(async () =>
      expect((await read("nonroot-image")).status?.containerStatuses?.[0]?.state?.waiting).toEqual({
        reason: "CreateContainerConfigError",
        message: `container has runAsNonRoot and image will run as root (pod: "nonroot-image_${NS}(${uid})", container: c)`,
      }),
    );
    await vi.waitFor(async () => expect((await read("nonroot-uid0")).status?.containerStatuses?.[0]?.state?.waiting?.message).toMatch(/^container's runAsUser breaks non-root policy/));
  });
});

describe("the image's command", () => {
  it("args alone replace the image's CMD; command drops it; the working directory defaults to / (and is made when missing)", async () => {
    await pod("args-only", { args: ["sh", "-c", "pwd; echo from-args; sleep 300"] });
    await pod("command-only", { command: ["sh", "-c", "echo from-command; sleep 300"], workingDir: "/tmp/made" });
    await Promise.all([running("args-only"), running("command-only")]);
    const logs = async (name: string) => core.readNamespacedPodLog({ namespace: NS, name });
    await vi.waitFor(async () => expect(await logs("args-only")).toBe("/\nfrom-args\n"));
    await vi.waitFor(async () => expect(await logs("command-only")).toBe("from-command\n"));
    expect((await exec("args-only", ["pwd"])).stdout).toBe("/\n");
    expect((await exec("command-only", ["pwd"])).stdout).toBe("/tmp/made\n");
  });

  it("a command missing from the image fails to start like a missing binary: StartError 128, CrashLoopBackOff / Failed", async () => {
    await pod("missing-always", { command: ["no-such-binary"] });
    await pod("missing-never", { command: ["/no/such/path"] }, { restartPolicy: "Never" });
    await vi.waitFor(async () => {
      const status = (await read("missing-always")).status!.containerStatuses![0]!;
      expect(status.lastState?.terminated).toMatchObject({
        exitCode: 128,
        reason: "StartError",
        message: expect.stringContaining('exec: "no-such-binary": executable file not found in $PATH: unknown'),
      });
      expect(status.state?.waiting?.reason).toBe("CrashLoopBackOff");
      expect(status.restartCount).toBeGreaterThanOrEqual(1);
    });
    await vi.waitFor(async () => {
      const never = (await read("missing-never")).status!;
      expect(never.phase).toBe("Failed");
      expect(never.containerStatuses![0]!.state?.terminated).toMatchObject({
        exitCode: 128,
        reason: "StartError",
        message: expect.stringContaining('exec: "/no/such/path": stat /no/such/path: no such file or directory'),
      });
    });
  });

  it("exec of a command the container does not have is the runtime's 500 InternalError, not an exit code", async () => {
    await pod("exec-target", {});
    await running("exec-target");
    const result = await exec("exec-target", ["no-such-tool", "--flag"]);
    expect(result.status).toMatchObject({
      status: "Failure",
      reason: "InternalError",
      code: 500,
      message: expect.stringContaining('OCI runtime exec failed: exec failed: unable to start container process: exec: "no-such-tool": executable file not found in $PATH: unknown'),
    });
  });
});

describe("time-based controllers on the cluster's clock", () => {
  it("a Job's activeDeadlineSeconds and ttlSecondsAfterFinished follow a manual clock", async () => {
    const clock = createManualClock();
    const timed = await runEmulator(emulator, { options: { clock, tickMs: 10 } });
    try {
      const tkc = new k8s.KubeConfig();
      tkc.loadFromString(timed.credentials.kubeconfig!);
      const tcore = tkc.makeApiClient(k8s.CoreV1Api);
      const batch = tkc.makeApiClient(k8s.BatchV1Api);
      await tcore.createNamespace({ body: { metadata: { name: "jobs" } } });
      await batch.createNamespacedJob({
        namespace: "jobs",
        body: {
          metadata: { name: "slow" },
          spec: { activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 30, template: { spec: { restartPolicy: "Never", containers: [{ name: "c", image: "img", command: ["sleep", "600"] }] } } },
        },
      });
      await clock.advance(59_000);
      expect((await batch.readNamespacedJob({ namespace: "jobs", name: "slow" })).status?.conditions ?? []).toEqual([]);
      await clock.advance(1_000);
      await vi.waitFor(async () => expect((await batch.readNamespacedJob({ namespace: "jobs", name: "slow" })).status?.conditions?.map((c) => c.reason)).toContain("DeadlineExceeded"));
      await clock.advance(30_000);
      await vi.waitFor(async () => expect((await batch.listNamespacedJob({ namespace: "jobs" })).items).toEqual([]));
    } finally {
      await timed.close();
    }
  });
});

describe("listing and watching", () => {
  it("lists pods by label and field selectors across namespaces, and a watch sees a deletion", async () => {
    await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: "w", labels: { fid: "yes" } } } });
    const all = await core.listSecretForAllNamespaces({ labelSelector: "fid=yes" });
    expect(all.items.map((s) => s.metadata?.name)).toEqual(["w"]);
    const events: string[] = [];
    const watch = await new k8s.Watch(kc).watch(
      `/api/v1/namespaces/${NS}/secrets`,
      { resourceVersion: all.metadata!.resourceVersion, fieldSelector: "metadata.name=w" },
      (type) => events.push(type),
      () => undefined,
    );
    await core.deleteNamespacedSecret({ namespace: NS, name: "w" });
    await vi.waitFor(() => expect(events).toEqual(["DELETED"]));
    watch.abort();
  });
});

describe("coverage", () => {
  it("every operation of client-node's generated APIs is classified, none is 'not yet', and the README's table is current", () => {
    const operations = kubernetesSdkOperations();
    expect(operations.length).toBeGreaterThan(500);
    const report = coverageReport(kubernetesCoverage(operations, routedBy()), operations);
    expect(report.unclassified).toEqual([]);
    expect(report.counts["not yet"]).toBe(0);
    // The operations a sandbox workload uses are served (pods, exec, logs, secrets, namespaces, jobs, sandboxes).
    const served = new Set(report.rows.filter((row) => row.status === "served").map((row) => `${row.group}.${row.name}`));
    for (const op of [
      "CoreV1Api.createNamespacedPod",
      "CoreV1Api.connectGetNamespacedPodExec",
      "CoreV1Api.readNamespacedPodLog",
      "CoreV1Api.listNamespacedPod",
      "BatchV1Api.createNamespacedJob",
      "CustomObjectsApi.createNamespacedCustomObject",
    ]) {
      expect(served).toContain(op);
    }
    const readmeUrl = new URL("../README.md", import.meta.url);
    const readme = readFileSync(readmeUrl, "utf8");
    // UPDATE_COVERAGE=1 rewrites the README's generated table (between its coverage markers).
    if (process.env.UPDATE_COVERAGE) writeFileSync(readmeUrl, withCoverageTable(readme, coverageTable(report)));
    else expect(readme).toContain(coverageTable(report));
  });
});
