import { isIP } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { z } from "zod";
import { defineProviderConfig, FIELD_MAX_LENGTH, fields } from "@paperclip-sandbox/kit";
import { ADAPTER_TYPES, ADAPTERS, imageAllowed, withRegistry } from "./adapters.js";

const CLUSTER = "Cluster";
const TENANT = "Tenant";
const PODS = "Pods";
const NETWORK = "Network";
const JOB = "Job backend";
const TUNING = "Tuning";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsLabel = (max: number) => (value: string) =>
  value.length > max ? `must be at most ${max} characters` : DNS_LABEL.test(value) ? undefined : "must be lower-case letters, digits and dashes, starting and ending with a letter or digit";
/** A trimmed string that must be a DNS label of at most `max` characters. */
const dnsLabelString = (max: number) =>
  z
    .string()
    .trim()
    .superRefine((value, ctx) => {
      const problem = dnsLabel(max)(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });
const cidrItem = (value: string) => {
  const [address, prefix, extra] = value.split("/");
  const family = isIP(address ?? "");
  const ok = extra === undefined && family !== 0 && prefix !== undefined && /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
  return ok ? undefined : "must be a CIDR such as 10.0.0.0/8";
};
const fqdnItem = (value: string) => (/^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}\.?$/i.test(value) ? undefined : "must be a host name such as api.github.com");
const quantity = /^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$/;
const quantityField = (title: string, def: string, description: string) =>
  fields.ui(z.string().trim().regex(quantity, { error: "must be a Kubernetes quantity such as 500m, 2 or 4Gi" }), { title, description, group: PODS, advanced: true }).default(def);

export const kubernetesConfigSchema = z.object({
  inCluster: fields.boolean({
    default: false,
    title: "In-cluster credentials",
    description: "Use the service account of the pod Paperclip runs in. Set exactly one of this, Kubeconfig or Kubeconfig secret.",
    group: CLUSTER,
  }),
  kubeconfig: fields
    .secretRef({ title: "Kubeconfig", description: "A kubeconfig (YAML or JSON), stored as a company secret. Its current context is used.", group: CLUSTER, maxLength: FIELD_MAX_LENGTH.document })
    .optional(),
  kubeconfigSecretRef: fields
    .secretRef({ title: "Kubeconfig secret", description: "An existing Paperclip secret holding a kubeconfig.", group: CLUSTER, maxLength: FIELD_MAX_LENGTH.document })
    .optional(),
  backend: fields
    .oneOf(["sandbox-cr", "job"], {
      title: "Backend",
      description:
        "sandbox-cr: an agent-sandbox Sandbox whose long-lived pod receives every command (needs the agent-sandbox controller). job: a batch/v1 Job that runs its entrypoint once, with no command execution and no native file sync.",
      group: CLUSTER,
    })
    .default("sandbox-cr"),
  namespacePrefix: fields
    .ui(
      z
        .string()
        .trim()
        .max(20, { error: "must be at most 20 characters" })
        .regex(/^[a-z0-9]([-a-z0-9]*)?$/, { error: "must be lower-case letters, digits and dashes" }),
      {
        title: "Namespace prefix",
        description: "Each company gets the namespace <prefix><company slug>.",
        group: TENANT,
        advanced: true,
      },
    )
    .default("paperclip-"),
  companySlug: fields
    .ui(dnsLabelString(43), {
      title: "Company slug",
      description: "The tenant namespace's suffix. Empty: derived from the company id.",
      group: TENANT,
      advanced: true,
    })
    .optional(),
  adapterType: fields
    .oneOf(ADAPTER_TYPES, {
      title: "Default adapter",
      description: "Picks the runtime image and its default egress when a run does not name a known adapter: claude_local reaches api.anthropic.com, codex_local api.openai.com.",
      group: PODS,
    })
    .default("claude_local"),
  image: fields
    .ui(z.string().trim().min(1).max(FIELD_MAX_LENGTH.image), {
      title: "Image override",
      description: "Run this image instead of the adapter's runtime image. It must match the image allow-list.",
      group: PODS,
      advanced: true,
    })
    .optional(),
  imageRegistry: fields
    .ui(z.string().trim().min(1).max(FIELD_MAX_LENGTH.image), {
      title: "Image registry",
      description: "Registry (and path) replacing ghcr.io in the runtime images, e.g. a mirror.",
      group: PODS,
      advanced: true,
    })
    .optional(),
  imageAllowList: fields.stringList({
    maxItemLength: FIELD_MAX_LENGTH.image,
    title: "Image allow-list",
    description: "Glob patterns (* matches anything) an image override must match. The adapters' runtime images are always allowed.",
    group: PODS,
    advanced: true,
  }),
  imagePullSecrets: fields.stringList({
    title: "Image pull secrets",
    description: "Names of image pull secrets that already exist in the tenant namespace.",
    group: PODS,
    advanced: true,
    item: dnsLabel(253),
  }),
  runtimeClassName: fields
    .ui(z.string().trim().min(1), {
      title: "Runtime class",
      description: "A RuntimeClass for the pods, e.g. kata-fc for Firecracker microVMs (the cluster must have it).",
      group: PODS,
      advanced: true,
    })
    .optional(),
  serviceAccountAnnotations: fields
    .ui(z.record(z.string(), z.string()), { title: "Service account annotations", description: "Annotations on the tenant service account, e.g. an IRSA role.", group: TENANT, advanced: true })
    .default({}),
  cpuRequest: quantityField("CPU request", "500m", "CPU requested per pod."),
  cpuLimit: quantityField("CPU limit", "2", "CPU limit per pod."),
  memoryRequest: quantityField("Memory request", "1Gi", "Memory requested per pod."),
  memoryLimit: quantityField("Memory limit", "4Gi", "Memory limit per pod."),
  egressMode: fields
    .oneOf(["standard", "cilium"], {
      title: "Egress mode",
      description: "standard: Kubernetes NetworkPolicies (IP ranges only; host names open public IPv4 on ports 80 and 443). cilium: CiliumNetworkPolicies that allow exact host names.",
      group: NETWORK,
    })
    .default("standard"),
  egressAllowFqdns: fields.stringList({ title: "Allowed host names", description: "Hosts every pod of this environment may reach, besides the adapter's API host.", group: NETWORK, item: fqdnItem }),
  egressAllowCidrs: fields.stringList({ title: "Allowed IP ranges", description: "IP ranges (CIDR) every pod of the company may reach.", group: NETWORK, item: cidrItem }),
  serverNamespace: fields
    .ui(dnsLabelString(63), { title: "Paperclip server namespace", description: "Namespace of the Paperclip server pods, which the pods may call back.", group: NETWORK, advanced: true })
    .default("paperclip"),
  serverPodLabels: fields
    .ui(z.record(z.string(), z.string()), { title: "Paperclip server pod labels", description: "Labels selecting the Paperclip server pods.", group: NETWORK, advanced: true })
    .default({ "app.kubernetes.io/name": "paperclip" }),
  serverPort: fields
    .positiveInt({ min: 1, max: 65535, title: "Paperclip server port", description: "Port of the Paperclip server the pods may call back.", group: NETWORK, advanced: true })
    .default(3100),
  entrypoint: fields.stringList({
    maxItemLength: FIELD_MAX_LENGTH.commandWord,
    title: "Sandbox entrypoint",
    description: "Command of the long-lived sandbox pod. Empty: a shell loop that sleeps and reaps orphaned processes.",
    group: PODS,
    advanced: true,
  }),
  jobCommand: fields.stringList({
    maxItemLength: FIELD_MAX_LENGTH.commandWord,
    title: "Job command",
    description: "Command the Job runs once. Empty: the image's own entrypoint.",
    group: JOB,
    advanced: true,
  }),
  jobTtlSecondsAfterFinished: fields
    .positiveInt({ min: 0, max: 604_800, title: "Job TTL after finish", unit: "s", description: "How long a finished Job is kept before Kubernetes deletes it.", group: JOB, advanced: true })
    .default(900),
  podActivityDeadlineSec: fields
    .positiveInt({ min: 1, max: 604_800, title: "Activity deadline", unit: "s", description: "Longest a Job runs, and longest one file sync may take.", group: TUNING, advanced: true })
    .default(3600),
  readyTimeoutSec: fields
    .positiveInt({ min: 1, max: 3600, title: "Pod ready timeout", unit: "s", description: "How long acquire waits for the pod to be running.", group: TUNING, advanced: true })
    .default(180),
  timeoutMs: fields.timeoutMs({ default: 300_000, title: "Command timeout", description: "Time limit of one command when Paperclip sets none.", group: TUNING, advanced: true }),
  reuseLease: fields.reuseLease(),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
});

export type KubernetesConfig = z.output<typeof kubernetesConfigSchema>;

/** The default runtime images (always allowed), after the registry override. */
function defaultImages(config: KubernetesConfig): string[] {
  return Object.values(ADAPTERS).map((a) => withRegistry(a.image, config.imageRegistry));
}

export const kubernetesConfig = defineProviderConfig(kubernetesConfigSchema, {
  warnings: (config) => {
    const warnings: string[] = [];
    if (config.egressMode === "standard" && config.egressAllowCidrs.length === 0) {
      warnings.push(
        "Egress mode standard cannot allow host names exactly: each pod's host names open public IPv4 on ports 80 and 443 (private, loopback, link-local, CGNAT and multicast ranges excluded); use cilium for exact host names",
      );
    }
    return warnings;
  },
});

const credentialSources = (config: KubernetesConfig) => [config.inCluster === true, Boolean(config.kubeconfig), Boolean(config.kubeconfigSecretRef)].filter(Boolean).length;

/**
 * With none set, a worker running in a pod (the host forwards KUBERNETES_SERVICE_HOST) uses its
 * service account; elsewhere that is a clear error at probe and acquire.
 */
export function missingCredentials(config: KubernetesConfig, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (credentialSources(config) > 0 || env.KUBERNETES_SERVICE_HOST) return undefined;
  return "Credentials: none set: set Kubeconfig, Kubeconfig secret or In-cluster credentials (the worker is not running in a cluster)";
}

/** auth-provider names client-node can use (a tokenFile config is its file authenticator). */
const AUTH_PROVIDERS = new Set(["oidc", "azure", "gcp"]);

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * The kubeconfig itself, at validation (not first at probe): readable, a current context naming a
 * cluster and a user, credentials of a kind client-node can use, and never credentials over plain
 * http to anything but loopback. Messages name the field and never repeat its content.
 */
function kubeconfigProblems(config: KubernetesConfig): string[] {
  const text = config.inCluster ? undefined : (config.kubeconfig ?? config.kubeconfigSecretRef);
  if (!text) return [];
  const title = config.kubeconfig ? "Kubeconfig" : "Kubeconfig secret";
  const kc = new KubeConfig();
  try {
    kc.loadFromString(text);
  } catch (error) {
    // The parser's first line says what and where (line:column); later lines quote the document.
    return [
      `${title}: not a readable kubeconfig (${String((error as Error).message)
        .split("\n")[0]!
        .slice(0, 200)})`,
    ];
  }
  const contextName = kc.getCurrentContext();
  const context = contextName ? kc.getContextObject(contextName) : null;
  if (!context) return [`${title}: no current context (current-context must name one of its contexts)`];
  const cluster = kc.getCluster(context.cluster);
  if (!cluster) return [`${title}: the current context names no cluster of its clusters`];
  const user = context.user ? kc.getUser(context.user) : null;
  if (!user) return [`${title}: the current context names no user of its users`];
  const provider = user.authProvider as { name?: unknown; config?: { tokenFile?: unknown } } | null | undefined;
  const hasAuth = Boolean(user.token || user.certData || user.certFile || user.username || user.exec || provider);
  if (provider && !AUTH_PROVIDERS.has(String(provider.name)) && !provider.config?.tokenFile) {
    return [`${title}: the user's auth-provider ${JSON.stringify(String(provider.name).slice(0, 40))} is not supported (use a token, a client certificate, exec, or auth-provider oidc, azure or gcp)`];
  }
  if (!hasAuth) return [`${title}: the current context's user has no credentials client-node can use (a token, a client certificate, username and password, exec or auth-provider)`];
  let server: URL;
  try {
    server = new URL(cluster.server);
  } catch {
    return [`${title}: the cluster's server is not a URL`];
  }
  if (server.protocol === "http:" && !isLoopbackHost(server.hostname)) {
    return [`${title}: the cluster's server http://${server.host} is plain http: its credentials would travel in clear text; use https (http is allowed only for localhost, 127.0.0.0/8 and ::1)`];
  }
  if (server.protocol !== "https:" && server.protocol !== "http:") return [`${title}: the cluster's server must be an https URL`];
  return [];
}

/** Rules across fields (exactly one credential source; the kubeconfig; the job backend's limits; the allow-list). */
export function crossFieldProblems(config: KubernetesConfig): string[] {
  const problems: string[] = [];
  const sources = credentialSources(config);
  if (sources > 1) problems.push(`Credentials: set exactly one of In-cluster credentials, Kubeconfig or Kubeconfig secret (${sources} set)`);
  else problems.push(...kubeconfigProblems(config));
  if (config.backend === "job" && config.reuseLease) problems.push("Reuse lease: the job backend cannot keep a lease (its pod runs once); use the sandbox-cr backend");
  if (config.image && !imageAllowed(config.image, config.imageAllowList) && !defaultImages(config).includes(config.image)) {
    problems.push(`Image override: ${config.image} is not in the image allow-list`);
  }
  return problems;
}
