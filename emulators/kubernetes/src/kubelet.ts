// The kubelet of the one emulated node: a pod becomes a bubblewrap jail (the "image" is the host's
// read-only tree), its emptyDirs writable directories mounted where the pod says, its container
// run as the pod's user, its command resolved as a container runtime resolves it (entrypoint/cmd,
// PATH; a missing binary is a StartError), its phase and conditions what a kubelet reports.
import { SandboxError, SandboxInputError, type ExecHandle, type Sandbox, type SandboxBackend, type SandboxMount } from "@paperclip-sandbox/sandbox-backend";
import type { VendorClock } from "@paperclip-sandbox/emulator-kit";
import type { Cluster } from "./cluster.js";
import { isoNow } from "./cluster.js";
import type { KubeObject } from "./validation.js";

/**
 * The emulated image: the host's tree, whose passwd has root (0) and sandbox (1000, home
 * /home/sandbox), no USER (so containers run as root unless the pod says otherwise), no ENTRYPOINT,
 * CMD `defaultCommand` and WORKDIR `/`.
 */
const IMAGE_USERS: Record<number, { name: string; home: string }> = { 0: { name: "root", home: "/root" }, 1000: { name: "sandbox", home: "/home/sandbox" } };
const IMAGE_WORKDIR = "/";

/** What runc reports when the container's process cannot start (the kubelet's StartError). */
function startFailure(argv0: string, found: "missing" | "not-executable"): string {
  const detail = argv0.includes("/") ? (found === "missing" ? `stat ${argv0}: no such file or directory` : `permission denied`) : "executable file not found in $PATH";
  return `exec: ${JSON.stringify(argv0)}: ${detail}`;
}

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
  /** Aborted when the pod terminates or the kubelet closes: ends a restart back-off. */
  stop: AbortController;
}

export class Kubelet {
  readonly #cluster: Cluster;
  readonly #backend: SandboxBackend;
  readonly #defaultCommand: string[];
  readonly #clock: VendorClock;
  readonly #pods = new Map<string, PodRuntime>();
  #nextIp = 10;
  #closed = false;

  constructor(cluster: Cluster, backend: SandboxBackend, defaultCommand: string[], clock: VendorClock) {
    this.#cluster = cluster;
    this.#backend = backend;
    this.#defaultCommand = defaultCommand;
    this.#clock = clock;
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
    const rt: PodRuntime = { uid: pod.metadata!.uid, namespace: pod.metadata!.namespace!, name: pod.metadata!.name!, restarts: 0, ip: `10.244.0.${this.#nextIp++ % 250}`, stop: new AbortController() };
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
      return {
        ...p,
        status: {
          ...p.status,
          phase: "Pending",
          containerStatuses: [{ name: c.name, image: c.image, imageID: "", ready: false, started: false, restartCount: rt.restarts, state: { waiting: { reason, message } } }],
        },
      };
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
      if (!volume) return `volume ${JSON.stringify(mount.name)} not found`;
      if (!volume.emptyDir) return `emulator limit: volume ${JSON.stringify(mount.name)} is not an emptyDir (only emptyDir volumes are emulated)`;
    }
    if ((pod.spec?.containers ?? []).length !== 1) return "emulator limit: a pod runs exactly one container";
    return undefined;
  }

  /** The emptyDir mounts of a container: one directory per volume, at every mountPath (and subPath). */
  #mounts(container: any): SandboxMount[] {
    return (container.volumeMounts ?? []).map((mount: any) => ({
      path: mount.mountPath,
      volume: volumeKey(mount.name),
      ...(mount.readOnly ? { readOnly: true } : {}),
      ...(mount.subPath ? { subPath: mount.subPath } : {}),
    }));
  }

  /**
   * The container's user as a kubelet resolves it: runAsUser/runAsGroup (container over pod), else
   * the image's user (root). runAsNonRoot refuses root with the kubelet's own messages
   * (CreateContainerConfigError).
   */
  #user(rt: PodRuntime, pod: KubeObject, container: any): { uid: number; gid: number } | { error: string } {
    const pick = (field: string) => container.securityContext?.[field] ?? pod.spec?.securityContext?.[field];
    const runAsUser: number | undefined = pick("runAsUser");
    const uid = runAsUser ?? 0;
    const gid: number = pick("runAsGroup") ?? (runAsUser === undefined ? 0 : uid);
    if (pick("runAsNonRoot") === true && uid === 0) {
      const where = `(pod: "${rt.name}_${rt.namespace}(${rt.uid})", container: ${container.name})`;
      return { error: runAsUser === undefined ? `container has runAsNonRoot and image will run as root ${where}` : `container's runAsUser breaks non-root policy ${where}` };
    }
    return { uid, gid };
  }

  async #start(rt: PodRuntime): Promise<void> {
    const pod = this.#cluster.store.get(this.#podType(), rt.namespace, rt.name);
    if (!pod || pod.metadata?.uid !== rt.uid || pod.metadata?.deletionTimestamp || this.#closed) return;
    const container = pod.spec?.containers?.[0] ?? {};
    const problem = this.#unsupported(pod, container);
    if (problem) return this.#waiting(rt, "CreateContainerError", problem);
    const user = this.#user(rt, pod, container);
    if ("error" in user) return this.#waiting(rt, "CreateContainerConfigError", user.error);
    const env = this.#environment(rt, container);
    if ("missing" in env && typeof env.missing === "string") {
      rt.waitingForSecret = true;
      return this.#waiting(rt, "CreateContainerConfigError", `secret "${env.missing}" not found`);
    }
    rt.waitingForSecret = false;
    const start = (async () => {
      const deadline = pod.spec?.activeDeadlineSeconds;
      const known = IMAGE_USERS[user.uid];
      try {
        rt.sandbox = await this.#backend.create({
          id: `pod-${rt.uid}`,
          // HOME from the image's passwd (containerd's rule: "/" for a uid it does not list); the pod's env wins.
          env: { HOSTNAME: rt.name, HOME: known?.home ?? "/", ...(env as Record<string, string>) },
          ttlMs: typeof deadline === "number" ? this.#clock.duration(deadline * 1000) + 5_000 : 7 * 24 * 3_600_000,
          labels: { namespace: rt.namespace, pod: rt.name },
          user: { uid: user.uid, gid: user.gid, name: known && user.uid !== 0 ? known.name : "sandbox", home: known && user.uid !== 0 ? known.home : "/home/sandbox" },
          mounts: this.#mounts(container),
        });
      } catch (error) {
        // A mount point the jail cannot make (inside the read-only host tree): the runtime's mount failure.
        if (error instanceof SandboxInputError) return this.#waiting(rt, "CreateContainerError", `emulator limit: ${error.message}`);
        throw error;
      }
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
    // The image has no ENTRYPOINT and CMD `defaultCommand`: command replaces the entrypoint (and drops
    // the CMD), args replace the CMD.
    const argv = container.command ? [...container.command, ...(container.args ?? [])] : (container.args ?? this.#defaultCommand);
    const cwd = container.workingDir ?? IMAGE_WORKDIR;
    const missing = await resolveCommand(rt.sandbox!, argv[0]!);
    if (missing)
      return this.#startError(
        rt,
        pod,
        container,
        `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: ${missing}: unknown`,
      );
    // runc makes a missing working directory (it fails only where it cannot: a read-only tree).
    await rt.sandbox!.files.mkdir(cwd, { parents: true }).catch(() => undefined);
    let main: ExecHandle;
    try {
      main = await rt.sandbox!.exec({ argv, cwd, detached: true, tag: "main", outputLimitBytes: 4 * 1024 * 1024 });
    } catch (error) {
      if (!(error instanceof SandboxError)) throw error;
      return this.#startError(
        rt,
        pod,
        container,
        `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: ${error.message}: unknown`,
      );
    }
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
        containerStatuses: [
          {
            name: container.name,
            image: container.image,
            imageID: `emulator://${container.image}`,
            containerID: `emulator://${rt.sandbox!.id}`,
            ready: true,
            started: true,
            restartCount: rt.restarts,
            state: { running: { startedAt } },
          },
        ],
      },
    }));
    // A lost supervisor connection (the pod being torn down) is no exit of the container.
    main.exited.then(
      (exit) => this.#mainExited(rt, pod, container, exit.exitCode ?? (exit.signal ? 137 : 1), startedAt),
      () => undefined,
    );
  }

  /** The process could not start (missing binary): a StartError, exit code 128, restarted by policy. */
  #startError(rt: PodRuntime, pod: KubeObject, container: any, message: string): Promise<void> {
    const at = isoNow(this.#cluster.now());
    return this.#mainExited(rt, pod, container, 128, at, { reason: "StartError", message });
  }

  async #mainExited(rt: PodRuntime, pod: KubeObject, container: any, exitCode: number, startedAt: string, failure?: { reason: string; message: string }): Promise<void> {
    if (rt.terminating || this.#closed) return;
    const policy = pod.spec?.restartPolicy ?? "Always";
    const restart = policy === "Always" || (policy === "OnFailure" && exitCode !== 0);
    const finishedAt = isoNow(this.#cluster.now());
    const terminated = {
      exitCode,
      reason: failure?.reason ?? (exitCode === 0 ? "Completed" : "Error"),
      ...(failure ? { message: failure.message } : {}),
      startedAt,
      finishedAt,
      containerID: `emulator://${rt.sandbox?.id}`,
    };
    if (restart) {
      rt.restarts += 1;
      const c = pod.spec?.containers?.[0] ?? {};
      this.#update(rt, (p) => ({
        ...p,
        status: {
          ...p.status,
          containerStatuses: [
            {
              name: c.name,
              image: c.image,
              imageID: `emulator://${c.image}`,
              ...p.status.containerStatuses?.[0],
              ready: false,
              started: false,
              restartCount: rt.restarts,
              lastState: { terminated },
              state: {
                waiting: {
                  reason: "CrashLoopBackOff",
                  message: `back-off ${Math.min(300, 10 * 2 ** (rt.restarts - 1))}s restarting failed container=${c.name} pod=${rt.name}_${rt.namespace}(${rt.uid})`,
                },
              },
            },
          ],
        },
      }));
      // The kubelet's back-off (10 s, doubling, at most 5 min) on the vendor clock.
      await this.#clock.sleep(Math.min(300_000, 10_000 * 2 ** (rt.restarts - 1)), rt.stop.signal);
      if (!rt.terminating && !this.#closed && rt.sandbox) await this.#runMain(rt, pod, container);
      return;
    }
    this.#update(rt, (p) => ({
      ...p,
      status: {
        ...p.status,
        phase: exitCode === 0 ? "Succeeded" : "Failed",
        conditions: (p.status.conditions ?? []).map((c: any) =>
          c.type === "Ready" || c.type === "ContainersReady" ? { ...c, status: "False", reason: "PodCompleted", lastTransitionTime: finishedAt } : c,
        ),
        containerStatuses: [
          {
            name: pod.spec?.containers?.[0]?.name,
            image: pod.spec?.containers?.[0]?.image,
            imageID: "",
            ...p.status.containerStatuses?.[0],
            ready: false,
            started: false,
            restartCount: rt.restarts,
            state: { terminated },
          },
        ],
      },
    }));
  }

  /** A deleted pod: its jail is destroyed (confirmed), then the object goes. */
  async terminate(pod: KubeObject): Promise<void> {
    const rt = this.#pods.get(pod.metadata!.uid);
    if (rt) {
      rt.terminating = true;
      rt.stop.abort();
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
    for (const rt of this.#pods.values()) rt.stop.abort();
    for (const rt of this.#pods.values()) {
      rt.terminating = true;
      await rt.starting?.catch(() => undefined);
      rt.main?.close();
      await this.#backend.destroy(`pod-${rt.uid}`).catch(() => undefined);
    }
    this.#pods.clear();
  }
}

/** An emptyDir's storage key: its volume name as a DNS label (names are DNS labels already). */
function volumeKey(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 63) || "volume"
  );
}

/**
 * How runc finds the process to start: a name with a slash must be an executable file; a bare name
 * is looked up in the container's PATH. Null when found; else runc's own error text.
 */
export async function resolveCommand(sandbox: Sandbox, argv0: string): Promise<string | null> {
  let found = "";
  const probe = argv0.includes("/")
    ? 'if [ -d "$1" ]; then echo not-executable; elif [ -x "$1" ]; then echo ok; elif [ -e "$1" ]; then echo not-executable; else echo missing; fi'
    : 'if command -v -- "$1" >/dev/null 2>&1; then echo ok; else echo missing; fi';
  await sandbox.runner.run(`set -- ${shellQuote(argv0)}\n${probe}`, { stdout: (chunk: Buffer) => (found += chunk), stderr: () => undefined });
  const verdict = found.trim();
  return verdict === "ok" ? null : startFailure(argv0, verdict === "not-executable" ? "not-executable" : "missing");
}

const shellQuote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;
