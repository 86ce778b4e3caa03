// Pod Security admission, "restricted" and "baseline" levels, as the API server's built-in plugin
// enforces them on pods of a namespace labelled `pod-security.kubernetes.io/enforce`. The messages
// are the plugin's own: `violates PodSecurity "restricted:latest": <check> (<detail>), ...`.
import { apiError } from "./status.js";
import type { KubeObject } from "./validation.js";

type Level = "privileged" | "baseline" | "restricted";

interface Container {
  name: string;
  securityContext?: Record<string, any>;
  ports?: Array<{ hostPort?: number }>;
}

const ALLOWED_VOLUME_TYPES = new Set(["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]);
const BASELINE_CAPABILITIES = new Set(["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"]);

const quoteList = (names: string[]) => names.map((n) => JSON.stringify(n)).join(", ");
const containersPhrase = (names: string[]) => `${names.length === 1 ? "container" : "containers"} ${quoteList(names)}`;

function allContainers(spec: any): Container[] {
  return [...(spec.initContainers ?? []), ...(spec.containers ?? []), ...(spec.ephemeralContainers ?? [])];
}

/** The failed checks (`name (detail)`) of a pod spec at a level, in the plugin's check order. */
export function podSecurityViolations(spec: any, level: Level): string[] {
  if (level === "privileged") return [];
  const pod = spec.securityContext ?? {};
  const containers = allContainers(spec);
  const out: Array<[string, string]> = [];

  if (level === "restricted") {
    const noEscalation = containers.filter((c) => c.securityContext?.allowPrivilegeEscalation !== false).map((c) => c.name);
    if (noEscalation.length) out.push(["allowPrivilegeEscalation", `allowPrivilegeEscalation != false (${containersPhrase(noEscalation)} must set securityContext.allowPrivilegeEscalation=false)`]);
  }

  const caps: string[] = [];
  if (level === "restricted") {
    const notDropped = containers.filter((c) => !(c.securityContext?.capabilities?.drop ?? []).includes("ALL")).map((c) => c.name);
    if (notDropped.length) caps.push(`${containersPhrase(notDropped)} must set securityContext.capabilities.drop=["ALL"]`);
  }
  const added = new Map<string, string[]>();
  for (const c of containers) {
    for (const cap of c.securityContext?.capabilities?.add ?? []) {
      const allowed = level === "restricted" ? cap === "NET_BIND_SERVICE" : BASELINE_CAPABILITIES.has(cap);
      if (!allowed) added.set(c.name, [...(added.get(c.name) ?? []), cap]);
    }
  }
  for (const [name, list] of added) caps.push(`container ${JSON.stringify(name)} must not include ${quoteList(list)} in securityContext.capabilities.add`);
  if (caps.length) out.push([level === "restricted" ? "capabilities_restricted" : "capabilities_baseline", `unrestricted capabilities (${caps.join("; ")})`]);

  const hostNs = ["hostNetwork", "hostPID", "hostIPC"].filter((k) => spec[k] === true).map((k) => `${k}=true`);
  if (hostNs.length) out.push(["hostNamespaces", `host namespaces (${hostNs.join(", ")})`]);

  if (level === "baseline") {
    const hostPaths = (spec.volumes ?? []).filter((v: any) => v.hostPath).map((v: any) => v.name);
    if (hostPaths.length) out.push(["hostPathVolumes", `hostPath volumes (${hostPaths.length === 1 ? "volume" : "volumes"} ${quoteList(hostPaths)})`]);
  }

  const hostPorts = containers.flatMap((c) => (c.ports ?? []).filter((p) => p.hostPort).map((p) => `container ${JSON.stringify(c.name)} uses hostPort ${p.hostPort}`));
  if (hostPorts.length) out.push(["hostPorts", `hostPort (${hostPorts.join(", ")})`]);

  const privileged = containers.filter((c) => c.securityContext?.privileged === true).map((c) => c.name);
  if (privileged.length) out.push(["privileged", `privileged (${containersPhrase(privileged)} must not set securityContext.privileged=true)`]);

  if (level === "restricted") {
    const restricted: string[] = [];
    for (const volume of spec.volumes ?? []) {
      const type = Object.keys(volume).find((k) => k !== "name");
      if (type && !ALLOWED_VOLUME_TYPES.has(type)) restricted.push(`volume ${JSON.stringify(volume.name)} uses restricted volume type ${JSON.stringify(type)}`);
    }
    if (restricted.length) out.push(["restrictedVolumes", `restricted volume types (${restricted.join(", ")})`]);

    const podNonRoot = pod.runAsNonRoot;
    const explicitFalse = containers.filter((c) => c.securityContext?.runAsNonRoot === false).map((c) => c.name);
    const unset = containers.filter((c) => c.securityContext?.runAsNonRoot === undefined).map((c) => c.name);
    const nonRoot: string[] = [];
    if (podNonRoot === false) nonRoot.push("pod must not set securityContext.runAsNonRoot=false");
    if (explicitFalse.length) nonRoot.push(`${containersPhrase(explicitFalse)} must not set securityContext.runAsNonRoot=false`);
    if (podNonRoot !== true && unset.length) nonRoot.push(`pod or ${containersPhrase(unset)} must set securityContext.runAsNonRoot=true`);
    if (nonRoot.length) out.push(["runAsNonRoot", `runAsNonRoot != true (${nonRoot.join("; ")})`]);

    const rootUser: string[] = [];
    if (pod.runAsUser === 0) rootUser.push("pod must not set runAsUser=0");
    const rootContainers = containers.filter((c) => c.securityContext?.runAsUser === 0).map((c) => c.name);
    if (rootContainers.length) rootUser.push(`${containersPhrase(rootContainers)} must not set runAsUser=0`);
    if (rootUser.length) out.push(["runAsUser", `runAsUser=0 (${rootUser.join("; ")})`]);
  }

  const okSeccomp = (t: unknown) => t === "RuntimeDefault" || t === "Localhost";
  const seccomp: string[] = [];
  if (pod.seccompProfile?.type === "Unconfined") seccomp.push(`pod must not set securityContext.seccompProfile.type to "Unconfined"`);
  const unconfined = containers.filter((c) => c.securityContext?.seccompProfile?.type === "Unconfined").map((c) => c.name);
  if (unconfined.length) seccomp.push(`${containersPhrase(unconfined)} must not set securityContext.seccompProfile.type to "Unconfined"`);
  if (level === "restricted" && !okSeccomp(pod.seccompProfile?.type)) {
    const missing = containers.filter((c) => c.securityContext?.seccompProfile?.type === undefined).map((c) => c.name);
    if (missing.length) seccomp.push(`pod or ${containersPhrase(missing)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`);
  }
  if (seccomp.length) out.push([level === "restricted" ? "seccompProfile_restricted" : "seccompProfile_baseline", `seccompProfile (${seccomp.join("; ")})`]);

  return out.sort((a, b) => a[0].localeCompare(b[0])).map(([, text]) => text);
}

/** Refuses a pod the namespace's enforced level does not admit (403, the plugin's message). */
export function admitPod(namespace: KubeObject | undefined, pod: KubeObject): void {
  const labels = namespace?.metadata?.labels ?? {};
  const level = labels["pod-security.kubernetes.io/enforce"] as Level | undefined;
  if (!level || (level !== "baseline" && level !== "restricted")) return;
  const version = labels["pod-security.kubernetes.io/enforce-version"] ?? "latest";
  const violations = podSecurityViolations(pod.spec ?? {}, level);
  if (violations.length === 0) return;
  const name = pod.metadata?.name ?? "";
  throw apiError(403, "Forbidden", `pods ${JSON.stringify(name)} is forbidden: violates PodSecurity "${level}:${version}": ${violations.join(", ")}`, { name, kind: "pods" });
}
