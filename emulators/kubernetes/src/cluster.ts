// The emulated cluster: the object store plus what runs behind the API server: admission, the
// garbage collector (owner references, foreground/background/orphan deletion, namespace
// termination), the agent-sandbox controller, the Job controller and the kubelet (kubelet.ts).
import type { VendorClock } from "@paperclip-sandbox/emulator-kit";
import type { SandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import { admitPod } from "./admission.js";
import { Kubelet } from "./kubelet.js";
import { apiVersionOf, typeKey, type ResourceType } from "./resources.js";
import { apiError, notFound } from "./status.js";
import { ObjectStore, randomSuffix, type StoreEvent } from "./store.js";
import { validateObject, type KubeObject } from "./validation.js";

export type Propagation = "Foreground" | "Background" | "Orphan";

const FOREGROUND = "foregroundDeletion";
const ORPHAN = "orphan";
const SANDBOX_NAME_HASH = "agents.x-k8s.io/sandbox-name-hash";

export interface ClusterOptions {
  types: ResourceType[];
  backend: SandboxBackend;
  /** The cluster's clock: timestamps, shutdownTime, deadlines, TTLs and back-offs run on it. */
  clock: VendorClock;
  /** Controller tick, real ms (how often time-based work is looked at: shutdownTime, deadlines, TTLs). */
  tickMs: number;
  /** The main process of a container whose spec names no command (an image entrypoint stands in). */
  defaultCommand: string[];
}

export class Cluster {
  readonly store: ObjectStore;
  readonly types: ResourceType[];
  readonly kubelet: Kubelet;
  readonly now: () => number;
  readonly clock: VendorClock;
  readonly #byKey = new Map<string, ResourceType>();
  readonly #timer: NodeJS.Timeout;
  #closed = false;
  readonly #pending = new Set<Promise<unknown>>();

  constructor(options: ClusterOptions) {
    this.clock = options.clock;
    this.now = () => options.clock.now();
    this.types = options.types;
    for (const t of options.types) this.#byKey.set(typeKey(t), t);
    this.store = new ObjectStore(this.now);
    this.kubelet = new Kubelet(this, options.backend, options.defaultCommand, options.clock);
    this.store.subscribe((event) => this.#track(this.#react(event)));
    this.#timer = setInterval(() => this.#track(this.#tick()), options.tickMs);
    this.#timer.unref();
  }

  type(group: string, resource: string): ResourceType {
    const t = this.#byKey.get(`${group || "core"}/${resource}`);
    if (!t) throw new Error(`kubernetes emulator: no resource ${group}/${resource}`);
    return t;
  }

  maybeType(group: string, resource: string): ResourceType | undefined {
    return this.#byKey.get(`${group || "core"}/${resource}`);
  }

  #track(work: Promise<unknown>): void {
    const p = work.catch((error: unknown) => {
      if (!this.#closed) process.stderr.write(`kubernetes emulator: controller error: ${(error as Error)?.stack ?? error}\n`);
    });
    this.#pending.add(p);
    void p.finally(() => this.#pending.delete(p));
  }

  /** Create through admission and validation, as any API client (controllers included) does. */
  create(type: ResourceType, namespace: string | undefined, body: KubeObject, version = type.versions[0]!): KubeObject {
    // As the API server orders it: namespace lifecycle admission, then validation, then Pod Security.
    const ns = type.namespaced ? this.store.get(this.type("", "namespaces"), undefined, namespace!) : undefined;
    if (type.namespaced) {
      if (!ns) throw notFound("namespaces", namespace!);
      if (ns.metadata?.deletionTimestamp) {
        throw apiError(403, "Forbidden", `${type.resource} "${body.metadata?.name ?? ""}" is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`, {
          name: body.metadata?.name,
          kind: type.resource,
        });
      }
    }
    validateObject({ kind: type.kind, group: type.group, version, nameRule: type.nameRule }, body);
    if (type.kind === "Pod") admitPod(ns, body);
    const { status, ...rest } = body;
    const initial: KubeObject = secretData({ ...rest, apiVersion: apiVersionOf(type), kind: type.kind });
    if (type.kind === "Namespace") initial.status = { phase: "Active" };
    else if (type.kind === "Pod") initial.status = { phase: "Pending", qosClass: "BestEffort" };
    else if (status !== undefined && !type.subresources?.includes("status")) initial.status = status;
    if (type.kind === "Namespace") initial.metadata = { ...initial.metadata, labels: { ...initial.metadata?.labels, "kubernetes.io/metadata.name": initial.metadata?.name } };
    return this.store.create(type, namespace, initial);
  }

  /** Replace (PUT): the spec side, or the status side for the status sub-resource. */
  replace(type: ResourceType, namespace: string | undefined, name: string, body: KubeObject, subresource: "status" | undefined, version = type.versions[0]!): KubeObject {
    const current = this.store.mustGet(type, namespace, name);
    const merged: KubeObject = subresource === "status" ? { ...current, status: body.status } : { ...body, status: current.status };
    validateObject({ kind: type.kind, group: type.group, version, nameRule: type.nameRule }, { ...merged, metadata: { ...merged.metadata, name } });
    return this.store.update(type, namespace, name, () => secretData({ ...merged, apiVersion: apiVersionOf(type), kind: type.kind }), body.metadata?.resourceVersion);
  }

  /** DELETE: pods terminate first, namespaces empty first, owners per the propagation policy. */
  delete(type: ResourceType, namespace: string | undefined, name: string, propagation?: Propagation): KubeObject | undefined {
    const current = this.store.mustGet(type, namespace, name);
    if (current.metadata?.deletionTimestamp) return current;
    // batch/v1 Jobs deleted through the API orphan their pods unless told otherwise (kubectl passes Background).
    const policy: Propagation = propagation ?? (type.kind === "Job" ? "Orphan" : "Background");
    if (type.kind === "Pod") {
      const marked = this.store.markDeleting(type, namespace, name);
      this.#track(this.kubelet.terminate(marked));
      return marked;
    }
    if (type.kind === "Namespace") {
      const marked = this.store.update(type, undefined, name, (obj) => {
        obj.metadata!.deletionTimestamp = isoNow(this.now());
        obj.status = { phase: "Terminating" };
        return obj;
      });
      this.#track(this.#terminateNamespace(name));
      return marked;
    }
    if (policy === "Foreground") {
      const marked = this.store.markDeleting(type, namespace, name, FOREGROUND);
      this.#track(this.#finishForeground(type, marked));
      return marked;
    }
    if (policy === "Orphan") {
      const uid = current.metadata!.uid;
      for (const { type: t, object } of this.store.all()) {
        if ((object.metadata?.ownerReferences ?? []).some((r: { uid: string }) => r.uid === uid)) {
          this.store.update(t, object.metadata?.namespace, object.metadata!.name, (o) => {
            o.metadata!.ownerReferences = (o.metadata!.ownerReferences ?? []).filter((r: { uid: string }) => r.uid !== uid);
            if (o.metadata!.ownerReferences.length === 0) delete o.metadata!.ownerReferences;
            return o;
          });
        }
      }
    }
    this.store.remove(type, namespace, name);
    return undefined;
  }

  dependentsOf(uid: string): Array<{ type: ResourceType; object: KubeObject }> {
    return this.store.all().filter(({ object }) => (object.metadata?.ownerReferences ?? []).some((r: { uid: string }) => r.uid === uid));
  }

  async #finishForeground(type: ResourceType, owner: KubeObject): Promise<void> {
    const uid = owner.metadata!.uid;
    for (const { type: t, object } of this.dependentsOf(uid)) {
      if (!object.metadata?.deletionTimestamp) this.delete(t, object.metadata?.namespace, object.metadata!.name, "Foreground");
    }
    await this.#waitUntil(() => this.dependentsOf(uid).length === 0);
    const current = this.store.get(type, owner.metadata?.namespace, owner.metadata!.name);
    if (!current || current.metadata?.uid !== uid) return;
    const rest = (current.metadata!.finalizers ?? []).filter((f: string) => f !== FOREGROUND && f !== ORPHAN);
    if (rest.length === 0) this.store.remove(type, owner.metadata?.namespace, owner.metadata!.name);
    else this.store.update(type, owner.metadata?.namespace, owner.metadata!.name, (o) => ({ ...o, metadata: { ...o.metadata, finalizers: rest } }));
  }

  async #terminateNamespace(name: string): Promise<void> {
    for (const t of this.types.filter((t) => t.namespaced)) {
      for (const obj of this.store.list(t, name)) {
        if (!obj.metadata?.deletionTimestamp) this.delete(t, name, obj.metadata!.name, "Background");
      }
    }
    await this.#waitUntil(() => this.types.filter((t) => t.namespaced).every((t) => this.store.list(t, name).length === 0));
    this.store.remove(this.type("", "namespaces"), undefined, name);
  }

  async #waitUntil(done: () => boolean, timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (this.#closed || Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Reacts to every change: GC of dependents, the controllers. */
  async #react(event: StoreEvent): Promise<void> {
    if (this.#closed) return;
    const { resourceType: type, object } = event;
    if (event.type === "DELETED") {
      // Background garbage collection: dependents whose owners are all gone follow them.
      const uid = object.metadata?.uid;
      for (const dep of this.dependentsOf(uid)) {
        const owners: Array<{ uid: string }> = dep.object.metadata?.ownerReferences ?? [];
        if (owners.every((r) => r.uid === uid || !this.#uidExists(r.uid)) && !dep.object.metadata?.deletionTimestamp) {
          this.delete(dep.type, dep.object.metadata?.namespace, dep.object.metadata!.name, "Background");
        }
      }
    }
    if (type.kind === "Sandbox") await this.#reconcileSandbox(event);
    else if (type.kind === "Job") await this.#reconcileJob(event);
    else if (type.kind === "Pod") await this.#podChanged(event);
    else if (type.kind === "Secret" && event.type === "ADDED") this.kubelet.secretAdded(object.metadata!.namespace);
  }

  #uidExists(uid: string): boolean {
    return this.store.all().some(({ object }) => object.metadata?.uid === uid);
  }

  // --- agent-sandbox controller -------------------------------------------------------------

  async #reconcileSandbox(event: StoreEvent): Promise<void> {
    if (event.type === "DELETED") return;
    const sandbox = event.object;
    const ns = sandbox.metadata!.namespace!;
    const name = sandbox.metadata!.name!;
    if (sandbox.metadata?.deletionTimestamp) return;
    const pods = this.type("", "pods");
    const wantsPod = !this.#sandboxExpired(sandbox) && sandbox.spec?.operatingMode !== "Suspended" && sandbox.spec?.replicas !== 0;
    const pod = this.store.get(pods, ns, name);
    if (!wantsPod) {
      if (pod && !pod.metadata?.deletionTimestamp) this.delete(pods, ns, name);
      return;
    }
    if (pod) return;
    const template = sandbox.spec?.podTemplate ?? {};
    const nameHash = fnv1a(name);
    try {
      this.create(pods, ns, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name,
          labels: { ...(template.metadata?.labels ?? {}), [SANDBOX_NAME_HASH]: nameHash },
          annotations: { ...(template.metadata?.annotations ?? {}) },
          ownerReferences: [{ apiVersion: sandbox.apiVersion, kind: "Sandbox", name, uid: sandbox.metadata!.uid, controller: true, blockOwnerDeletion: true }],
        },
        spec: template.spec,
      });
      this.#setSandboxStatus(sandbox, { ready: false, reason: "DependenciesNotReady", message: "Pod exists with phase: Pending", selector: `${SANDBOX_NAME_HASH}=${nameHash}` });
    } catch (error) {
      this.#setSandboxStatus(sandbox, { ready: false, reason: "ReconcilerError", message: `Error seen: ${(error as Error).message}`, selector: `${SANDBOX_NAME_HASH}=${nameHash}` });
    }
  }

  #sandboxExpired(sandbox: KubeObject): boolean {
    const at = sandbox.spec?.shutdownTime;
    return typeof at === "string" && Date.parse(at) <= this.now();
  }

  #setSandboxStatus(sandbox: KubeObject, s: { ready: boolean; reason: string; message: string; selector?: string; podIP?: string }): void {
    const type = this.type("agents.x-k8s.io", "sandboxes");
    const current = this.store.get(type, sandbox.metadata?.namespace, sandbox.metadata!.name);
    if (!current || current.metadata?.deletionTimestamp) return;
    const old = (current.status?.conditions ?? []).find((c: { type: string }) => c.type === "Ready");
    const status = s.ready ? "True" : "False";
    if (old && old.status === status && old.reason === s.reason && old.message === s.message && (current.status?.podIPs?.[0] ?? undefined) === s.podIP) return;
    this.store.update(type, sandbox.metadata?.namespace, sandbox.metadata!.name, (obj) => {
      obj.status = {
        ...(obj.status ?? {}),
        ...(s.selector ? { selector: s.selector } : {}),
        conditions: [
          {
            type: "Ready",
            status,
            reason: s.reason,
            message: s.message,
            observedGeneration: obj.metadata!.generation,
            lastTransitionTime: old?.status === status ? old.lastTransitionTime : isoNow(this.now()),
          },
        ],
      };
      if (s.podIP) {
        obj.status.podIPs = [s.podIP];
        obj.status.nodeName = "paperclip-emulator-node";
      } else {
        delete obj.status.podIPs;
        delete obj.status.nodeName;
      }
      return obj;
    });
  }

  // --- pods -> their controllers ----------------------------------------------------------

  async #podChanged(event: StoreEvent): Promise<void> {
    const pod = event.object;
    if (event.type === "ADDED") this.#track(this.kubelet.admitted(pod));
    const owner = (pod.metadata?.ownerReferences ?? []).find((r: { controller?: boolean }) => r.controller);
    if (!owner) return;
    if (owner.kind === "Sandbox") {
      const sandbox = this.store.get(this.type("agents.x-k8s.io", "sandboxes"), pod.metadata!.namespace, owner.name);
      if (!sandbox || sandbox.metadata?.uid !== owner.uid) return;
      if (event.type === "DELETED") {
        this.#setSandboxStatus(sandbox, {
          ready: false,
          reason: this.#sandboxExpired(sandbox) ? "SandboxExpired" : "DependenciesNotReady",
          message: this.#sandboxExpired(sandbox) ? "Sandbox has expired" : "Pod does not exist",
        });
        // The controller recreates a pod that went away while the sandbox still wants one.
        if (!sandbox.metadata?.deletionTimestamp) await this.#reconcileSandbox({ type: "MODIFIED", resourceType: this.type("agents.x-k8s.io", "sandboxes"), object: sandbox, resourceVersion: 0 });
        return;
      }
      const phase = pod.status?.phase;
      const ready = phase === "Running" && (pod.status?.conditions ?? []).some((c: { type: string; status: string }) => c.type === "Ready" && c.status === "True");
      const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
      this.#setSandboxStatus(sandbox, {
        ready,
        reason: ready ? "DependenciesReady" : phase === "Succeeded" ? "PodSucceeded" : phase === "Failed" ? "PodFailed" : "DependenciesNotReady",
        message: ready ? "Pod is Ready" : waiting ? `Pod is not ready: ${waiting.reason}: ${waiting.message ?? ""}`.trim() : `Pod exists with phase: ${phase ?? "Pending"}`,
        podIP: pod.status?.podIP,
      });
    } else if (owner.kind === "Job" && event.type !== "DELETED") {
      const job = this.store.get(this.type("batch", "jobs"), pod.metadata!.namespace, owner.name);
      if (!job || job.metadata?.uid !== owner.uid) return;
      const phase = pod.status?.phase;
      if (phase === "Succeeded" || phase === "Failed")
        this.#finishJob(
          job,
          phase === "Succeeded" ? "Complete" : "Failed",
          phase === "Failed" ? "BackoffLimitExceeded" : undefined,
          phase === "Failed" ? "Job has reached the specified backoff limit" : undefined,
        );
      else if (phase === "Running" && !job.status?.ready) this.#updateJobStatus(job, (s) => ({ ...s, ready: 1 }));
    }
  }

  // --- Job controller -----------------------------------------------------------------------

  async #reconcileJob(event: StoreEvent): Promise<void> {
    if (event.type !== "ADDED") return;
    const job = event.object;
    const ns = job.metadata!.namespace!;
    const uid = job.metadata!.uid;
    const template = job.spec?.template ?? {};
    const labels = {
      ...(template.metadata?.labels ?? {}),
      "batch.kubernetes.io/controller-uid": uid,
      "batch.kubernetes.io/job-name": job.metadata!.name,
      "controller-uid": uid,
      "job-name": job.metadata!.name,
    };
    this.#updateJobStatus(job, (s) => ({ ...s, startTime: isoNow(this.now()), active: 1, terminating: 0, ready: 0 }));
    try {
      this.create(this.type("", "pods"), ns, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: `${job.metadata!.name}-${randomSuffix()}`,
          labels,
          annotations: { ...(template.metadata?.annotations ?? {}), "batch.kubernetes.io/job-tracking": "" },
          ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: job.metadata!.name, uid, controller: true, blockOwnerDeletion: true }],
        },
        spec: template.spec,
      });
    } catch (error) {
      // The real controller records a FailedCreate event and retries; the condition says why here.
      this.#updateJobStatus(job, (s) => ({
        ...s,
        active: 0,
        conditions: [{ type: "FailedCreate", status: "True", reason: "FailedCreate", message: (error as Error).message, lastTransitionTime: isoNow(this.now()) }],
      }));
    }
  }

  #updateJobStatus(job: KubeObject, change: (status: Record<string, any>) => Record<string, any>): void {
    const type = this.type("batch", "jobs");
    if (!this.store.get(type, job.metadata?.namespace, job.metadata!.name)) return;
    this.store.update(type, job.metadata?.namespace, job.metadata!.name, (obj) => ({ ...obj, status: change({ ...(obj.status ?? {}) }) }));
  }

  #finishJob(job: KubeObject, outcome: "Complete" | "Failed", reason?: string, message?: string): void {
    const current = this.store.get(this.type("batch", "jobs"), job.metadata?.namespace, job.metadata!.name);
    if (!current || (current.status?.conditions ?? []).some((c: { type: string }) => c.type === "Complete" || c.type === "Failed")) return;
    const at = isoNow(this.now());
    this.#updateJobStatus(current, (s) => ({
      ...s,
      active: 0,
      ready: 0,
      ...(outcome === "Complete" ? { succeeded: 1, completionTime: at } : { failed: 1 }),
      conditions:
        outcome === "Complete"
          ? [
              { type: "SuccessCriteriaMet", status: "True", reason: "CompletionsReached", message: "Reached expected number of succeeded pods", lastProbeTime: at, lastTransitionTime: at },
              { type: "Complete", status: "True", reason: "CompletionsReached", message: "Reached expected number of succeeded pods", lastProbeTime: at, lastTransitionTime: at },
            ]
          : [
              { type: "FailureTarget", status: "True", reason, message, lastProbeTime: at, lastTransitionTime: at },
              { type: "Failed", status: "True", reason, message, lastProbeTime: at, lastTransitionTime: at },
            ],
    }));
  }

  // --- time-based work ----------------------------------------------------------------------

  async #tick(): Promise<void> {
    if (this.#closed) return;
    const now = this.now();
    const sandboxes = this.maybeType("agents.x-k8s.io", "sandboxes");
    if (sandboxes) {
      for (const sandbox of this.store.list(sandboxes)) {
        if (sandbox.metadata?.deletionTimestamp || !this.#sandboxExpired(sandbox)) continue;
        const pod = this.store.get(this.type("", "pods"), sandbox.metadata!.namespace, sandbox.metadata!.name);
        if (pod && !pod.metadata?.deletionTimestamp) this.delete(this.type("", "pods"), pod.metadata!.namespace, pod.metadata!.name);
        if (!pod) {
          if (sandbox.spec?.shutdownPolicy === "Delete") this.delete(sandboxes, sandbox.metadata!.namespace, sandbox.metadata!.name, "Background");
          else this.#setSandboxStatus(sandbox, { ready: false, reason: "SandboxExpired", message: "Sandbox has expired" });
        }
      }
    }
    const jobs = this.type("batch", "jobs");
    for (const job of this.store.list(jobs)) {
      if (job.metadata?.deletionTimestamp) continue;
      const finished = (job.status?.conditions ?? []).find((c: { type: string; status: string }) => (c.type === "Complete" || c.type === "Failed") && c.status === "True");
      const deadline = job.spec?.activeDeadlineSeconds;
      if (!finished && typeof deadline === "number" && job.status?.startTime && Date.parse(job.status.startTime) + this.clock.duration(deadline * 1000) <= now) {
        for (const pod of this.store.list(this.type("", "pods"), job.metadata!.namespace)) {
          if ((pod.metadata?.ownerReferences ?? []).some((r: { uid: string }) => r.uid === job.metadata!.uid) && !pod.metadata?.deletionTimestamp)
            this.delete(this.type("", "pods"), pod.metadata!.namespace, pod.metadata!.name);
        }
        this.#finishJob(job, "Failed", "DeadlineExceeded", "Job was active longer than specified deadline");
      }
      const ttl = job.spec?.ttlSecondsAfterFinished;
      if (finished && typeof ttl === "number" && Date.parse(finished.lastTransitionTime) + this.clock.duration(ttl * 1000) <= now)
        this.delete(jobs, job.metadata!.namespace, job.metadata!.name, "Background");
    }
  }

  /** Everything the cluster still runs or holds that a test created (namespaces excluded). */
  leftovers(): string[] {
    const out: string[] = [];
    for (const t of this.types) {
      if (t.kind === "Namespace") continue;
      for (const obj of this.store.list(t)) out.push(`${t.resource}/${obj.metadata?.namespace ? `${obj.metadata.namespace}/` : ""}${obj.metadata?.name}`);
    }
    return out;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    // The kubelet stops first (it ends restart back-offs the pending work may be waiting in).
    const kubelet = this.kubelet.close();
    await Promise.allSettled([...this.#pending]);
    await kubelet;
  }
}

/** A Secret's stringData is write-only: the API server folds it into data (base64). */
function secretData(obj: KubeObject): KubeObject {
  if (obj.kind !== "Secret" || !obj.stringData) return obj;
  const { stringData, ...rest } = obj;
  const data: Record<string, string> = { ...(rest.data ?? {}) };
  for (const [k, v] of Object.entries(stringData as Record<string, string>)) data[k] = Buffer.from(String(v), "utf8").toString("base64");
  return { ...rest, data };
}

export function isoNow(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** agent-sandbox's NameHash: FNV-1a 32-bit of the name, 8 hex digits. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, "utf8")) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}
