// The two waits of a workload, on injected clocks: deletion read again until the object is gone
// (120 s at most, then an error naming it and its finalizers), and the pod's readiness, where a
// refusal that sends no pod event is found by reading the workload's own status again.
import { ApiException } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPollTimeoutError } from "@paperclip-sandbox/kit";
import { startTestCluster, type TestCluster } from "./__fixtures__/cluster.js";
import { kubernetesConfig } from "./config.js";
import { createClientPool, type KubeClients } from "./kube.js";
import { destroyWorkload, waitForPod } from "./workload.js";

const ref = { namespace: "ns-1", kind: "sandbox" as const, name: "pc-01hzzzzzzzzzzzzzzzzzzzzzzz" };

function manualClock() {
  let t = 0;
  const pauses: number[] = [];
  return { pauses, now: () => t, sleep: async (ms: number) => void (pauses.push(ms), (t += ms)) };
}

describe("destroyWorkload", () => {
  /** Clients whose Sandbox reads as present `present` times after the delete, then 404. */
  function clients(present: number) {
    let reads = 0;
    const get = async () => {
      reads += 1;
      if (reads > present) throw new ApiException(404, "Not Found", JSON.stringify({ kind: "Status", reason: "NotFound" }), {});
      return { metadata: { name: ref.name, finalizers: ["foregroundDeletion"] } };
    };
    const custom = { deleteNamespacedCustomObject: async () => ({}), getNamespacedCustomObject: get };
    return { clients: { custom } as unknown as KubeClients, reads: () => reads };
  }

  it("reads the workload again, the pause growing to 500 ms, until it is gone", async () => {
    const c = clients(6);
    const clock = manualClock();
    await destroyWorkload(c.clients, ref, "v1beta1", undefined, clock);
    expect(c.reads()).toBe(7);
    expect(clock.pauses).toEqual([25, 50, 100, 200, 400, 500]);
  });

  it("gives up after 120 s, naming the workload and what holds it", async () => {
    const clock = manualClock();
    const error = await destroyWorkload(clients(Number.POSITIVE_INFINITY).clients, ref, "v1beta1", undefined, clock).catch((e: unknown) => e);
    expect(isPollTimeoutError(error)).toBe(true);
    expect((error as Error).message).toBe(`timed out after 120 s waiting for sandbox ns-1/${ref.name} to be deleted (finalizers: foregroundDeletion)`);
    expect(clock.now()).toBeLessThanOrEqual(120_000);
  });
});

describe("waitForPod", () => {
  let t: TestCluster;
  let kube: KubeClients;
  beforeAll(async () => {
    t = await startTestCluster();
    kube = createClientPool()(kubernetesConfig.parse(t.config));
  });
  afterAll(() => t?.close());

  it("fails with the workload's refusal, read again each second after a failed read and a quiet one", async () => {
    const answers: Array<() => Promise<string | undefined>> = [
      () => Promise.reject(new Error("API server hiccup")),
      async () => undefined,
      async () => "sandbox ns-1/x: its pod was refused: quota exceeded",
    ];
    let reads = 0;
    const clock = manualClock();
    const waiting = waitForPod(kube, { ...ref, namespace: "default" }, { timeoutMs: 60_000, clock, workloadProblem: () => answers[Math.min(reads++, answers.length - 1)]!() });
    await expect(waiting).rejects.toThrow("sandbox ns-1/x: its pod was refused: quota exceeded");
    expect(reads).toBe(3);
    expect(clock.pauses).toEqual([1_000, 1_000]);
  });
});
