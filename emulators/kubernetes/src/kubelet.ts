// The kubelet of the one emulated node: a pod becomes a bubblewrap jail (the "image" is the host's
// read-only /usr; the writable paths are the jail's own), its container's command the jail's main
// process, its phase and conditions what a kubelet reports. Exec and logs reach the jail.
import { SANDBOX_PATHS, type ExecHandle, type Sandbox, type SandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import type { Cluster } from "./cluster.js";
import { isoNow } from "./cluster.js";
import type { KubeObject } from "./validation.js";

/** The in-pod directories an emptyDir can be mounted at: the jail's writable directories. */
export const WRITABLE_MOUNT_PATHS = [SANDBOX_PATHS.workspace, SANDBOX_PATHS.tmp, SANDBOX_PATHS.home, SANDBOX_PATHS.cache];
const POD_UID = 1000;

interface PodRuntime {
  uid: string;
  namespace: string;
  name: string;
  sandbox?: Sandbox;
  main?: ExecHandle;
  starting?: Promise<void>;
  waitingForSecret?: boolean;
  terminating?: boolean;
  restarts: number;
  ip: string;
}

export class Kubelet {
  readonly #cluster: Cluster;
  readonly #backend: SandboxBackend;
  readonly #defaultCommand: string[];
  readonly #pods = new Map<string, PodRuntime>();
  #nextIp = 10;
  #closed = false;

  constructor(cluster: Cluster, backend: SandboxBackend, defaultCommand: string[]) {
    this.#cluster = cluster;
    this.#backend = backend;
    this.#defaultCommand = defaultCommand;
  }

  #podType() {
    return this.#cluster.type("", "pods");
  }

  #update(rt: PodRuntime, change: (pod: KubeObject) => KubeObject): KubeObject | undefined {
    const current = this.#cluster.store.get(this.#podType(), rt.namespace, rt.name);
    if (!current || current.metadata?.uid !== rt.uid) return undefined;
    return this.#cluster.store.update(this.#podType(), rt.namespace, rt.name, change);
  }

  /** A new pod: bind it to the node and start it. */
  async admitted(pod: KubeObject): Promise<void> {
    const rt: PodRuntime = { uid: pod.metadata!.uid, namespace: pod.metadata!.namespace!, name: pod.metadata!.name!, restarts: 0, ip: `10.244.0.${this.#nextIp++ % 250}` };
    this.#pods.set(rt.uid, rt);
    const now = isoNow(this.#cluster.now());
    this.#update(rt, (p) => ({
      ...p,
      spec: { ...p.spec, nodeName: "paperclip-emulator-node" },
      status: { ...p.status, phase: "Pending", conditions: [{ type: "PodScheduled", status: "True", lastTransitionTime: now }], hostIP: "127.0.0.1", startTime: now },
    }));
    await this.#start(rt);
  }

  secretAdded(namespace: string): void {
    for (const rt of this.#pods.values()) if (rt.namespace === namespace && rt.waitingForSecret && !rt.sandbox && !rt.starting) void this.#start(rt);
  }

  #waiting(rt: PodRuntime, reason: string, message: string): void {
    this.#update(rt, (p) => {
      const c = p.spec?.containers?.[0] ?? {};
      return { ...p, status: { ...p.status, phase: "Pending", containerStatuses: [{ name: c.name, image: c.image, imageID: "", ready: false, started: false, restartCount: rt.restarts, state: { waiting: { reason, message } } }] } };
    });
  }

  /** The container's environment: literal values, secretKeyRef values and envFrom secrets. */
  #environment(rt: PodRuntime, container: any): Record<string, string> | { missing: string } {
    const secrets = this.#cluster.type("", "secrets");
    const env: Record<string, string> = {};
    const secretData = (name: string): Record<string, string> | undefined => {
      const secret = this.#cluster.store.get(secrets, rt.namespace, name);
      if (!secret) return undefined;
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries((secret.data ?? {}) as Record<string, string>)) out[k] = Buffer.from(v, "base64").toString("utf8");
      for (const [k, v] of Object.entries((secret.stringData ?? {}) as Record<string, string>)) out[k] = v;
      return out;
    };
    for (const from of container.envFrom ?? []) {
      if (!from.secretRef) continue;
      const data = secretData(from.secretRef.name);
      if (!data) {
        if (from.secretRef.optional) continue;
        return { missing: from.secretRef.name };
      }
      for (const [k, v] of Object.entries(data)) env[`${from.prefix ?? ""}${k}`] = v;
    }
    for (const item of container.env ?? []) {
      if (item.value !== undefined) env[item.name] = String(item.value);
      else if (item.valueFrom?.secretKeyRef) {
        const data = secretData(item.valueFrom.secretKeyRef.name);
        if (!data) {
          if (item.valueFrom.secretKeyRef.optional) continue;
          return { missing: item.valueFrom.secretKeyRef.name };
        }
        const value = data[item.valueFrom.secretKeyRef.key];
        if (value !== undefined) env[item.name] = value;
      } else if (item.valueFrom?.fieldRef?.fieldPath === "metadata.name") env[item.name] = rt.name;
      else if (item.valueFrom?.fieldRef?.fieldPath === "metadata.namespace") env[item.name] = rt.namespace;
    }
    return env;
  }

  /** What the jail cannot be made to look like: refused as a container error naming the limit. */
  #unsupported(pod: KubeObject, container: any): string | undefined {
    const volumes = new Map<string, any>((pod.spec?.volumes ?? []).map((v: any) => [v.name, v]));
    for (const mount of container.volumeMounts ?? []) {
      const volume = volumes.get(mount.name);
      if (!volume?.emptyDir) return `emulator limit: volume ${JSON.stringify(mount.name)} is not an emptyDir (only emptyDir volumes are emulated)`;
      if (!WRITABLE_MOUNT_PATHS.includes(mount.mountPath)) return `emulator limit: emptyDir mount path ${JSON.stringify(mount.mountPath)} is not one of ${WRITABLE_MOUNT_PATHS.join(", ")}`;
    }
    const uid = container.securityContext?.runAsUser ?? pod.spec?.securityContext?.runAsUser;
    if (uid !== undefined && uid !== POD_UID) return `emulator limit: pods run as uid ${POD_UID} (runAsUser ${uid} was asked for)`;
    if ((pod.spec?.containers ?? []).length !== 1) return "emulator limit: a pod runs exactly one container";
    return undefined;
  }

  async #start(rt: PodRuntime): Promise<void> {
    const pod = this.#cluster.store.get(this.#podType(), rt.namespace, rt.name);
    if (!pod || pod.metadata?.uid !== rt.uid || pod.metadata?.deletionTimestamp || this.#closed) return;
    const container = pod.spec?.containers?.[0] ?? {};
    const problem = this.#unsupported(pod, container);
    if (problem) return this.#waiting(rt, "CreateContainerError", problem);
    const env = this.#environment(rt, container);
    if ("missing" in env && typeof env.missing === "string") {
      rt.waitingForSecret = true;
      return this.#waiting(rt, "CreateContainerConfigError", `secret "${env.missing}" not found`);
    }
    rt.waitingForSecret = false;
    const start = (async () => {
      const deadline = pod.spec?.activeDeadlineSeconds;
      rt.sandbox = await this.#backend.create({
        id: `pod-${rt.uid}`,
        env: { HOSTNAME: rt.name, ...(env as Record<string, string>) },
        ttlMs: typeof deadline === "number" ? deadline * 1000 + 5_000 : 7 * 24 * 3_600_000,
        labels: { namespace: rt.namespace, pod: rt.name },
      });
      if (rt.terminating || this.#closed) return;
      await this.#runMain(rt, pod, container);
    })();
    rt.starting = start;
    try {
      await start;
    } catch (error) {
      this.#waiting(rt, "RunContainerError", `emulator: the jail did not start: ${(error as Error).message}`);
    } finally {
      rt.starting = undefined;
    }
  }

  async #runMain(rt: PodRuntime, pod: KubeObject, container: any): Promise<void> {
    const argv = [...(container.command ?? this.#defaultCommand), ...(container.args ?? [])];
    const main = await rt.sandbox!.exec({ argv, cwd: container.workingDir ?? SANDBOX_PATHS.workspace, detached: true, tag: "main", outputLimitBytes: 4 * 1024 * 1024 });
    rt.main = main;
    const startedAt = isoNow(this.#cluster.now());
    this.#update(rt, (p) => ({
      ...p,
      status: {
        ...p.status,
        phase: "Running",
        podIP: rt.ip,
        podIPs: [{ ip: rt.ip }],
        conditions: ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"].map((type) => ({ type, status: "True", lastTransitionTime: startedAt })),
        containerStatuses: [{ name: container.name, image: container.image, imageID: `emulator://${container.image}`, containerID: `emulator://${rt.sandbox!.id}`, ready: true, started: true, restartCount: rt.restarts, state: { running: { startedAt } } }],
      },
    }));
    // A lost supervisor connection (the pod being torn down) is no exit of the container.
    main.exited.then(
      (exit) => this.#mainExited(rt, pod, container, exit.exitCode ?? (exit.signal ? 137 : 1), startedAt),
      () => undefined,
    );
  }

  async #mainExited(rt: PodRuntime, pod: KubeObject, container: any, exitCode: number, startedAt: string): Promise<void> {
    if (rt.terminating || this.#closed) return;
    const policy = pod.spec?.restartPolicy ?? "Always";
    const restart = policy === "Always" || (policy === "OnFailure" && exitCode !== 0);
    const finishedAt = isoNow(this.#cluster.now());
    const terminated = { exitCode, reason: exitCode === 0 ? "Completed" : "Error", startedAt, finishedAt, containerID: `emulator://${rt.sandbox?.id}` };
    if (restart) {
      rt.restarts += 1;
      this.#update(rt, (p) => ({ ...p, status: { ...p.status, containerStatuses: [{ ...p.status.containerStatuses?.[0], ready: false, restartCount: rt.restarts, lastState: { terminated }, state: { waiting: { reason: "CrashLoopBackOff", message: "back-off restarting failed container" } } }] } }));
      await new Promise((r) => setTimeout(r, Math.min(5_000, 200 * rt.restarts)));
      if (!rt.terminating && !this.#closed && rt.sandbox) await this.#runMain(rt, pod, container);
      return;
    }
    this.#update(rt, (p) => ({
      ...p,
      status: {
        ...p.status,
        phase: exitCode === 0 ? "Succeeded" : "Failed",
        conditions: (p.status.conditions ?? []).map((c: any) => (c.type === "Ready" || c.type === "ContainersReady" ? { ...c, status: "False", reason: "PodCompleted", lastTransitionTime: finishedAt } : c)),
        containerStatuses: [{ ...p.status.containerStatuses?.[0], ready: false, started: false, state: { terminated } }],
      },
    }));
  }

  /** A deleted pod: its jail is destroyed (confirmed), then the object goes. */
  async terminate(pod: KubeObject): Promise<void> {
    const rt = this.#pods.get(pod.metadata!.uid);
    if (rt) {
      rt.terminating = true;
      await rt.starting?.catch(() => undefined);
      rt.main?.close();
      await this.#backend.destroy(`pod-${rt.uid}`);
      this.#pods.delete(rt.uid);
    }
    const current = this.#cluster.store.get(this.#podType(), pod.metadata!.namespace, pod.metadata!.name);
    if (current?.metadata?.uid === pod.metadata!.uid) this.#cluster.store.remove(this.#podType(), pod.metadata!.namespace, pod.metadata!.name);
  }

  /** The running jail behind a pod, for exec. */
  sandboxOf(pod: KubeObject): Sandbox | undefined {
    const rt = this.#pods.get(pod.metadata!.uid);
    return rt && !rt.terminating ? rt.sandbox : undefined;
  }

  /** The container's output so far (stdout, then stderr: the jail keeps them apart). */
  async logs(pod: KubeObject): Promise<string> {
    const rt = this.#pods.get(pod.metadata!.uid);
    if (!rt?.main) return "";
    const out = await rt.main.read("stdout", 0).catch(() => undefined);
    const err = await rt.main.read("stderr", 0).catch(() => undefined);
    return `${out?.data.toString("utf8") ?? ""}${err?.data.toString("utf8") ?? ""}`;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const rt of this.#pods.values()) {
      rt.terminating = true;
      await rt.starting?.catch(() => undefined);
      rt.main?.close();
      await this.#backend.destroy(`pod-${rt.uid}`).catch(() => undefined);
    }
    this.#pods.clear();
  }
}
