// The per-run workload: an agent-sandbox Sandbox (its pod named after it) or a batch/v1 Job (its
// pod found by the job-name label), the pod's readiness, and deletion that waits until it is gone.
import { Watch } from "@kubernetes/client-node";
import { pollUntil, type ListedResource, type PollClock } from "@paperclip-sandbox/kit";
import type { KubernetesConfig } from "./config.js";
import { call, isStatus, type KubeClients } from "./kube.js";
import { leaseIds, type WorkloadRef } from "./names.js";

type Manifest = Record<string, any>;

const SANDBOX_GROUP = "agents.x-k8s.io";

/** The agent-sandbox version the cluster serves (v1beta1 preferred), cached per API server. */
export function sandboxApiVersion(clients: KubeClients, signal?: AbortSignal): Promise<string> {
  return clients.cache.get("sandbox-version", async () => {
    const groups = await call("getAPIVersions", true, () => clients.apis.getAPIVersions(), signal);
    const group = (groups.groups ?? []).find((g) => g.name === SANDBOX_GROUP);
    const versions = (group?.versions ?? []).map((v) => v.version);
    if (versions.includes("v1beta1")) return "v1beta1";
    if (versions.includes("v1alpha1")) return "v1alpha1";
    throw new Error(`backend sandbox-cr: the cluster at ${clients.server} does not serve ${SANDBOX_GROUP} Sandbox (v1beta1 or v1alpha1): install the agent-sandbox controller, or use backend job`);
  }) as Promise<string>;
}

export async function createWorkload(clients: KubeClients, ref: WorkloadRef, manifest: Manifest, version: string, signal?: AbortSignal): Promise<Manifest> {
  const create = () =>
    ref.kind === "sandbox"
      ? clients.custom.createNamespacedCustomObject({ group: SANDBOX_GROUP, version, namespace: ref.namespace, plural: "sandboxes", body: manifest })
      : clients.batch.createNamespacedJob({ namespace: ref.namespace, body: manifest as never });
  try {
    return (await call(ref.kind === "sandbox" ? "createSandbox" : "createJob", true, create, signal)) as Manifest;
  } catch (error) {
    // The name is this acquire's own: a 409 means an earlier attempt of this call went through.
    if (!isStatus(error, 409)) throw error;
    const found = await readWorkload(clients, ref, version, signal);
    if (!found) throw error;
    return found;
  }
}

export async function readWorkload(clients: KubeClients, ref: WorkloadRef, version: string, signal?: AbortSignal): Promise<Manifest | null> {
  try {
    return (await call(
      ref.kind === "sandbox" ? "getSandbox" : "readJob",
      true,
      () =>
        ref.kind === "sandbox"
          ? clients.custom.getNamespacedCustomObject({ group: SANDBOX_GROUP, version, namespace: ref.namespace, plural: "sandboxes", name: ref.name })
          : clients.batch.readNamespacedJob({ namespace: ref.namespace, name: ref.name }),
      signal,
    )) as Manifest;
  } catch (error) {
    if (isStatus(error, 404)) return null;
    throw error;
  }
}

/** Deletes the workload (foreground: its pod, Secret and policy first) and resolves once it is gone (120 s at most). */
export async function destroyWorkload(clients: KubeClients, ref: WorkloadRef, version: string, signal?: AbortSignal, clock: PollClock = {}): Promise<void> {
  try {
    await call(
      ref.kind === "sandbox" ? "deleteSandbox" : "deleteJob",
      true,
      () =>
        ref.kind === "sandbox"
          ? clients.custom.deleteNamespacedCustomObject({ group: SANDBOX_GROUP, version, namespace: ref.namespace, plural: "sandboxes", name: ref.name, propagationPolicy: "Foreground" })
          : clients.batch.deleteNamespacedJob({ namespace: ref.namespace, name: ref.name, propagationPolicy: "Foreground" }),
      signal,
    );
  } catch (error) {
    if (isStatus(error, 404)) return;
    throw error;
  }
  const finalizers = (workload: Manifest | null) => `finalizers: ${(workload?.metadata?.finalizers ?? []).join(", ") || "none"}`;
  const wait = { what: `${ref.kind} ${ref.namespace}/${ref.name} to be deleted`, timeoutMs: 120_000, intervalMs: 25, maxIntervalMs: 500, signal, describe: finalizers, ...clock };
  await pollUntil(
    () => readWorkload(clients, ref, version, signal),
    (workload) => !workload,
    wait,
  );
}

/** Pod states that will not resolve by waiting. */
const FATAL_WAITING = new Set(["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"]);

/**
 * Waits for the pod through one watch (fieldSelector on its name, or the job-name label), failing
 * at once on what waiting cannot fix: a refused pod (the Sandbox's ReconcilerError, the Job's
 * FailedCreate), an image that cannot be pulled, a container that cannot start. The pod comes from
 * the watch; only the workload's status (a refusal sends no pod event) is polled, each second.
 */
export async function waitForPod(
  clients: KubeClients,
  ref: WorkloadRef,
  opts: { timeoutMs: number; signal?: AbortSignal; workloadProblem?: () => Promise<string | undefined>; clock?: PollClock },
): Promise<Manifest> {
  const watch = new Watch(clients.kc);
  const path = `/api/v1/namespaces/${ref.namespace}/pods`;
  const query = ref.kind === "sandbox" ? { fieldSelector: `metadata.name=${ref.name}` } : { labelSelector: `batch.kubernetes.io/job-name=${ref.name}` };
  return new Promise<Manifest>((resolve, reject) => {
    let settled = false;
    let request: AbortController | undefined;
    const polling = new AbortController();
    const finish = (error: unknown, pod?: Manifest) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      polling.abort();
      opts.signal?.removeEventListener("abort", onAbort);
      request?.abort();
      error ? reject(error) : resolve(pod!);
    };
    const onAbort = () => finish(opts.signal?.reason ?? new Error("aborted"));
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => finish(new Error(`${ref.kind} ${ref.namespace}/${ref.name}: its pod was not running within ${Math.round(opts.timeoutMs / 1000)} s`)), opts.timeoutMs);
    // The workload's own status says when the pod was refused outright (no pod event ever comes); a failed read is read again.
    const problemOf = opts.workloadProblem;
    if (problemOf) {
      const each = { what: `${ref.kind} ${ref.namespace}/${ref.name} to report a problem`, intervalMs: 1_000, maxIntervalMs: 1_000, signal: polling.signal, ...opts.clock };
      pollUntil(() => problemOf().catch(() => undefined), Boolean, each).then(
        (problem) => finish(new Error(problem)),
        () => undefined,
      );
    }
    const onPod = (type: string, pod: Manifest) => {
      if (type === "DELETED") return;
      const phase = pod.status?.phase;
      const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
      if (waiting && FATAL_WAITING.has(waiting.reason)) return finish(new Error(`pod ${ref.namespace}/${pod.metadata?.name} cannot start: ${waiting.reason}: ${waiting.message ?? ""}`.trim()));
      const ready = phase === "Running" && (pod.status?.conditions ?? []).some((c: { type: string; status: string }) => c.type === "Ready" && c.status === "True");
      if (ready || (ref.kind === "job" && (phase === "Succeeded" || phase === "Failed"))) finish(undefined, pod);
    };
    const start = () =>
      watch
        .watch(path, query, onPod, (error) => {
          // The server ended the watch (timeout or a dropped connection): watch again.
          if (!settled) setTimeout(() => void start().catch((e: unknown) => finish(e)), error ? 200 : 0);
        })
        .then((controller) => {
          request = controller;
          if (settled) controller.abort();
        });
    void start().catch((error: unknown) => finish(error));
  });
}

/** A Sandbox's Ready condition when it reports a refused pod; a Job's FailedCreate. */
export function workloadProblem(workload: Manifest | null, ref: WorkloadRef): string | undefined {
  if (!workload) return `${ref.kind} ${ref.namespace}/${ref.name} is gone`;
  for (const c of workload.status?.conditions ?? []) {
    if ((c.type === "Ready" && c.reason === "ReconcilerError") || (c.type === "FailedCreate" && c.status === "True"))
      return `${ref.kind} ${ref.namespace}/${ref.name}: its pod was refused: ${String(c.message ?? "").replace(/^Error seen: /, "")}`;
  }
  return undefined;
}

/** The Job's pod name (the Job controller names it). */
export async function jobPodName(clients: KubeClients, ref: WorkloadRef, signal?: AbortSignal): Promise<string | undefined> {
  const pods = await call("listPods", true, () => clients.core.listNamespacedPod({ namespace: ref.namespace, labelSelector: `batch.kubernetes.io/job-name=${ref.name}` }), signal);
  return pods.items[0]?.metadata?.name;
}

export function expiryOf(workload: Manifest, kind: WorkloadRef["kind"], config: KubernetesConfig): Date | null {
  if (kind === "sandbox") return typeof workload.spec?.shutdownTime === "string" ? new Date(workload.spec.shutdownTime) : null;
  const start = workload.status?.startTime ?? workload.metadata?.creationTimestamp;
  const seconds = workload.spec?.activeDeadlineSeconds ?? config.podActivityDeadlineSec;
  return start ? new Date(Date.parse(start) + seconds * 1000) : null;
}

/** This provider's Sandboxes and Jobs carrying every label, across all namespaces (cluster-wide lists). */
export async function listWorkloads(clients: KubeClients, config: KubernetesConfig, labels: Record<string, string>): Promise<ListedResource[]> {
  const labelSelector = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const out: ListedResource[] = [];
  const push = (kind: WorkloadRef["kind"], item: Manifest) => {
    let providerLeaseId: string;
    try {
      providerLeaseId = leaseIds.encode({ namespace: item.metadata.namespace, kind, name: item.metadata.name });
    } catch {
      return; // not a name this provider makes
    }
    const ready = (item.status?.conditions ?? []).find((c: Manifest) => c.type === "Ready");
    out.push({
      providerLeaseId,
      labels: item.metadata.labels ?? {},
      createdAt: item.metadata.creationTimestamp,
      expiresAt: expiryOf(item, kind, config)?.toISOString() ?? null,
      state: item.metadata.deletionTimestamp ? "deleting" : kind === "sandbox" ? (ready?.reason ?? "pending") : item.status?.active ? "running" : "finished",
    });
  };
  const version = await sandboxApiVersion(clients).catch(() => undefined);
  if (version) {
    const list = (await call("listSandboxes", true, () => clients.custom.listClusterCustomObject({ group: SANDBOX_GROUP, version, plural: "sandboxes", labelSelector }))) as { items: Manifest[] };
    for (const item of list.items) push("sandbox", item);
  }
  const jobs = await call("listJobs", true, () => clients.batch.listJobForAllNamespaces({ labelSelector }));
  for (const item of jobs.items) push("job", item as Manifest);
  return out;
}
