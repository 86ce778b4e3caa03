// The test server seen through the real client-node: watch, selectors, optimistic concurrency,
// foreground deletion through owner references, exec's status channel and v5 half-close.
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as k8s from "@kubernetes/client-node";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "./index.js";

let emu: RunningEmulator;
let kc: k8s.KubeConfig;
let core: k8s.CoreV1Api;
const sc = { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] }, runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: "RuntimeDefault" } };

beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  kc = new k8s.KubeConfig();
  kc.loadFromString(emu.credentials.kubeconfig!);
  core = kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: "t", labels: { "pod-security.kubernetes.io/enforce": "restricted" } } } });
});
afterAll(() => emu.close());

describe("kubernetes test server", () => {
  it("lists by label selector, refuses a stale update, and watches changes from a resourceVersion", async () => {
    await core.createNamespacedSecret({ namespace: "t", body: { metadata: { name: "a", labels: { app: "x", tier: "1" } }, stringData: { k: "v" } } });
    await core.createNamespacedSecret({ namespace: "t", body: { metadata: { name: "b", labels: { app: "y" } } } });
    const list = await core.listNamespacedSecret({ namespace: "t", labelSelector: "app in (x,z),tier" });
    expect(list.items.map((s) => s.metadata?.name)).toEqual(["a"]);
    expect(list.items[0]!.data).toEqual({ k: Buffer.from("v").toString("base64") });
    const stale = { ...list.items[0]!, metadata: { ...list.items[0]!.metadata, resourceVersion: "1" } };
    await expect(core.replaceNamespacedSecret({ namespace: "t", name: "a", body: stale })).rejects.toMatchObject({ code: 409 });
    const events: string[] = [];
    const watch = new k8s.Watch(kc);
    const controller = await watch.watch(
      "/api/v1/namespaces/t/secrets",
      { resourceVersion: list.metadata!.resourceVersion },
      (type, obj) => events.push(`${type} ${obj.metadata.name}`),
      () => undefined,
    );
    await core.deleteNamespacedSecret({ namespace: "t", name: "b" });
    for (let i = 0; i < 50 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    expect(events).toEqual(["DELETED b"]);
  });

  it("foreground deletion removes the owner only after its dependents", async () => {
    const owner = await core.createNamespacedSecret({ namespace: "t", body: { metadata: { name: "owner" } } });
    await core.createNamespacedSecret({
      namespace: "t",
      body: { metadata: { name: "dep", ownerReferences: [{ apiVersion: "v1", kind: "Secret", name: "owner", uid: owner.metadata!.uid!, blockOwnerDeletion: true }] } },
    });
    await core.deleteNamespacedSecret({ namespace: "t", name: "owner", propagationPolicy: "Foreground" });
    for (let i = 0; i < 100; i++) {
      const left = (await core.listNamespacedSecret({ namespace: "t" })).items.map((s) => s.metadata?.name);
      if (!left.includes("owner")) {
        expect(left).not.toContain("dep");
        return;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error("owner not deleted");
  });

  it("exec: v5 half-closes stdin, the status channel carries the exit code", async () => {
    await core.createNamespacedPod({ namespace: "t", body: { metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "img", securityContext: sc }] } } });
    for (let i = 0; i < 100; i++) {
      if ((await core.readNamespacedPod({ namespace: "t", name: "p" })).status?.phase === "Running") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    let out = "";
    const stdout = new PassThrough().on("data", (d) => (out += d));
    const stdin = new PassThrough();
    stdin.end("abc");
    const status = await new Promise<k8s.V1Status>((resolve) => void new k8s.Exec(kc).exec("t", "p", "c", ["sh", "-c", "wc -c; exit 7"], stdout, null, stdin, false, resolve));
    expect(status).toMatchObject({ status: "Failure", reason: "NonZeroExitCode", details: { causes: [{ reason: "ExitCode", message: "7" }] } });
    // Every output frame left before the status frame; the client's stream delivers them in its own time.
    await vi.waitFor(() => expect(out.trim()).toBe("3"));
    await emu.requests.idle();
    expect(emu.requests.list({ protocol: "ws" }).at(-1)).toMatchObject({ status: 101, route: "/api/v1/namespaces/:namespace/pods/:name/exec" });
  });
});
