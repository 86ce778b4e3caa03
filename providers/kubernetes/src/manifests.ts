// Every object the provider writes, as plain manifests (tests assert their exact shape).
import type { KubernetesConfig } from "./config.js";
import { WORKLOAD_LABEL } from "./egress.js";

const SERVICE_ACCOUNT = "paperclip-tenant-sa";
const ROLE = "paperclip-tenant-role";
const ROLE_BINDING = "paperclip-tenant-rb";
const QUOTA = "paperclip-quota";
const LIMITS = "paperclip-limits";
const DENY_ALL = "paperclip-deny-all";
const EGRESS_ALLOW = "paperclip-egress-allow";
const EGRESS_FQDN = "paperclip-egress-fqdn";
export const CONTAINER = "agent";
export const MANAGED_BY = { "app.kubernetes.io/managed-by": "paperclip" };

/** The pod's writable paths (emptyDirs under a read-only root) and its user. */
export const POD_PATHS = { workspace: "/workspace", home: "/home/sandbox", cache: "/home/sandbox/.cache", tmp: "/tmp" } as const;
const POD_UID = 1000;

/** A shell that sleeps and, as PID 1, reaps the orphans of exec'd commands (no tini needed). */
export const DEFAULT_ENTRYPOINT = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"];

export interface TenantInput {
  namespace: string;
  companyLabel: string;
  config: KubernetesConfig;
}

export function tenantNamespaceManifest({ namespace, companyLabel }: TenantInput) {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name: namespace,
      labels: {
        ...MANAGED_BY,
        "paperclip-company": companyLabel,
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
      },
    },
  };
}

/** One pod's requests and limits: the container's own, and the tenant's LimitRange defaults. */
const podResources = (config: KubernetesConfig) => ({
  requests: { cpu: config.cpuRequest, memory: config.memoryRequest },
  limits: { cpu: config.cpuLimit, memory: config.memoryLimit },
});

const meta = (name: string, namespace: string, extra: Record<string, unknown> = {}) => ({ name, namespace, labels: { ...MANAGED_BY }, ...extra });

/** The tenant's objects besides the namespace, in creation order. */
export function tenantObjects({ namespace, config }: TenantInput): Array<{ kind: string; manifest: Record<string, any> }> {
  const dns = {
    to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
    ports: [
      { protocol: "UDP", port: 53 },
      { protocol: "TCP", port: 53 },
    ],
  };
  const server = {
    to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": config.serverNamespace } }, podSelector: { matchLabels: config.serverPodLabels } }],
    ports: [{ protocol: "TCP", port: config.serverPort }],
  };
  const objects: Array<{ kind: string; manifest: Record<string, any> }> = [
    {
      kind: "ServiceAccount",
      manifest: {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: meta(SERVICE_ACCOUNT, namespace, Object.keys(config.serviceAccountAnnotations).length ? { annotations: config.serviceAccountAnnotations } : {}),
        automountServiceAccountToken: false,
      },
    },
    { kind: "Role", manifest: { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: meta(ROLE, namespace), rules: [{ apiGroups: [""], resources: ["pods/log"], verbs: ["get"] }] } },
    {
      kind: "RoleBinding",
      manifest: {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: meta(ROLE_BINDING, namespace),
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: ROLE },
        subjects: [{ kind: "ServiceAccount", name: SERVICE_ACCOUNT, namespace }],
      },
    },
    {
      kind: "ResourceQuota",
      manifest: {
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: meta(QUOTA, namespace),
        spec: { hard: { pods: "20", "requests.cpu": "10", "requests.memory": "20Gi", "limits.cpu": "20", "limits.memory": "40Gi" } },
      },
    },
    {
      kind: "LimitRange",
      manifest: {
        apiVersion: "v1",
        kind: "LimitRange",
        metadata: meta(LIMITS, namespace),
        spec: {
          limits: [
            {
              type: "Container",
              max: { cpu: "8", memory: "16Gi" },
              min: { cpu: "10m", memory: "16Mi" },
              default: podResources(config).limits,
              defaultRequest: podResources(config).requests,
            },
          ],
        },
      },
    },
    {
      kind: "NetworkPolicy",
      manifest: { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: meta(DENY_ALL, namespace), spec: { podSelector: {}, policyTypes: ["Ingress", "Egress"] } },
    },
  ];
  if (config.egressMode === "cilium") {
    const egress: Array<Record<string, unknown>> = [
      {
        toEndpoints: [{ matchLabels: { "k8s:io.kubernetes.pod.namespace": "kube-system", "k8s-app": "kube-dns" } }],
        toPorts: [{ ports: [{ port: "53", protocol: "ANY" }], rules: { dns: [{ matchPattern: "*" }] } }],
      },
      {
        toEndpoints: [{ matchLabels: { "k8s:io.kubernetes.pod.namespace": config.serverNamespace, ...config.serverPodLabels } }],
        toPorts: [{ ports: [{ port: String(config.serverPort), protocol: "TCP" }] }],
      },
    ];
    if (config.egressAllowCidrs.length) egress.push({ toCIDRSet: config.egressAllowCidrs.map((cidr) => ({ cidr })) });
    objects.push({
      kind: "CiliumNetworkPolicy",
      manifest: { apiVersion: "cilium.io/v2", kind: "CiliumNetworkPolicy", metadata: meta(EGRESS_FQDN, namespace), spec: { endpointSelector: {}, egress } },
    });
  } else {
    const egress: Array<Record<string, unknown>> = [dns, server];
    if (config.egressAllowCidrs.length) egress.push({ to: config.egressAllowCidrs.map((cidr) => ({ ipBlock: { cidr } })) });
    objects.push({
      kind: "NetworkPolicy",
      manifest: { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: meta(EGRESS_ALLOW, namespace), spec: { podSelector: {}, policyTypes: ["Egress"], egress } },
    });
  }
  return objects;
}

export interface PodInput {
  config: KubernetesConfig;
  image: string;
  secretName: string;
  command: string[] | undefined;
  restartPolicy: "Always" | "Never";
}

/** The hardened pod: uid 1000, non-root, no capabilities, no escalation, read-only root, RuntimeDefault seccomp. */
export function podSpec({ config, image, secretName, command, restartPolicy }: PodInput): Record<string, unknown> {
  const mounts = [
    { name: "workspace", mountPath: POD_PATHS.workspace },
    { name: "home", mountPath: POD_PATHS.home },
    { name: "cache", mountPath: POD_PATHS.cache },
    { name: "tmp", mountPath: POD_PATHS.tmp },
  ];
  return {
    serviceAccountName: SERVICE_ACCOUNT,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    restartPolicy,
    ...(config.runtimeClassName ? { runtimeClassName: config.runtimeClassName } : {}),
    ...(config.imagePullSecrets.length ? { imagePullSecrets: config.imagePullSecrets.map((name) => ({ name })) } : {}),
    securityContext: { runAsUser: POD_UID, runAsGroup: POD_UID, runAsNonRoot: true, fsGroup: POD_UID, fsGroupChangePolicy: "OnRootMismatch", seccompProfile: { type: "RuntimeDefault" } },
    containers: [
      {
        name: CONTAINER,
        image,
        ...(command && command.length ? { command } : {}),
        workingDir: POD_PATHS.workspace,
        env: [
          { name: "HOME", value: POD_PATHS.home },
          { name: "TMPDIR", value: POD_PATHS.tmp },
          { name: "XDG_CACHE_HOME", value: POD_PATHS.cache },
        ],
        envFrom: [{ secretRef: { name: secretName } }],
        resources: podResources(config),
        securityContext: {
          runAsUser: POD_UID,
          runAsGroup: POD_UID,
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          privileged: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
          seccompProfile: { type: "RuntimeDefault" },
        },
        volumeMounts: mounts,
      },
    ],
    volumes: mounts.map(({ name }) => ({ name, emptyDir: {} })),
  };
}

export interface WorkloadInput {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  spec: Record<string, unknown>;
}

/** Only `spec.podTemplate` and the lifecycle fields: valid for agent-sandbox v1alpha1 and v1beta1. */
export function sandboxManifest({ namespace, name, labels, spec }: WorkloadInput, version: string, expiresAt: Date | null) {
  return {
    apiVersion: `agents.x-k8s.io/${version}`,
    kind: "Sandbox",
    metadata: { name, namespace, labels },
    spec: {
      podTemplate: { metadata: { labels: { ...labels, [WORKLOAD_LABEL]: name } }, spec },
      ...(expiresAt ? { shutdownTime: expiresAt.toISOString().replace(/\.\d{3}Z$/, "Z"), shutdownPolicy: "Delete" } : {}),
    },
  };
}

export function jobManifest({ namespace, name, labels, spec }: WorkloadInput, config: KubernetesConfig) {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, namespace, labels },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: config.podActivityDeadlineSec,
      ttlSecondsAfterFinished: config.jobTtlSecondsAfterFinished,
      template: { metadata: { labels: { ...labels, [WORKLOAD_LABEL]: name } }, spec },
    },
  };
}
