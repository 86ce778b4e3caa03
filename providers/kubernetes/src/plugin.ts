import { appendBlockedNetworkNote, defineSandboxProvider, egressEnv, labelValue, mergeEgressGrants, runProbeChecks, type EgressGrant, type SandboxHandle } from "@paperclip-sandbox/kit";
import { VersionApi } from "@kubernetes/client-node";
import { adapterFor, withRegistry } from "./adapters.js";
import { crossFieldProblems, kubernetesConfig, missingCredentials, type kubernetesConfigSchema, type KubernetesConfig } from "./config.js";
import { egressPolicyName, runCiliumPolicy, runNetworkPolicy, WORKLOAD_LABEL, type OwnerRef } from "./egress.js";
import { call, createClientPool, isStatus, type KubeClients } from "./kube.js";
import { DEFAULT_ENTRYPOINT, jobManifest, MANAGED_BY, POD_PATHS, podSpec, sandboxManifest } from "./manifests.js";
import { KUBERNETES_DRIVER_KEY, KUBERNETES_SHAPE } from "./manifest.js";
import { leaseIds, tenantNamespace, workloadName, type WorkloadRef } from "./names.js";
import { checkImageTools, jobRunner, podRunner } from "./runners.js";
import { ensureTenant } from "./tenant.js";
import { createWorkload, destroyWorkload, expiryOf, jobPodName, listWorkloads, readWorkload, sandboxApiVersion, waitForPod, workloadProblem } from "./workload.js";

export const RUN_ID_LABEL = "paperclip.io/run-id";

export interface KubernetesHandle extends SandboxHandle {
  ref: WorkloadRef;
  clients: KubeClients;
  /** agents.x-k8s.io version for a Sandbox; "v1" (batch/v1) for a Job. */
  version: string;
  podName: string | undefined;
  image: string;
  adapterType: string;
  /** What the run may reach: config lists, the adapter's API host, the task's grant. */
  grant: EgressGrant;
  policy: string | undefined;
}

export interface KubernetesPluginDeps {
  /** Milliseconds between readiness checks of a Job's pod name (tests). */
  now?: () => number;
}

type Manifest = Record<string, any>;

export function createKubernetesProvider(_deps: KubernetesPluginDeps = {}) {
  const clientsFor = createClientPool();

  const versionFor = (clients: KubeClients, kind: WorkloadRef["kind"], signal?: AbortSignal) => (kind === "sandbox" ? sandboxApiVersion(clients, signal) : Promise.resolve("v1"));

  const handleOf = (
    clients: KubeClients,
    ref: WorkloadRef,
    version: string,
    workload: Manifest,
    config: KubernetesConfig,
    extra: { podName?: string | undefined; grant?: EgressGrant; image?: string; adapterType?: string; policy?: string | undefined },
  ): KubernetesHandle => ({
    providerLeaseId: leaseIds.encode(ref),
    expiresAt: expiryOf(workload, ref.kind, config),
    labels: workload.metadata?.labels ?? {},
    // Being deleted: it will not run again (a destroy waits for it to go).
    state: workload.metadata?.deletionTimestamp ? "ended" : "running",
    ref,
    clients,
    version,
    podName: extra.podName ?? (ref.kind === "sandbox" ? ref.name : undefined),
    image: extra.image ?? workload.metadata?.annotations?.["paperclip.io/image"] ?? "",
    adapterType: extra.adapterType ?? workload.metadata?.annotations?.["paperclip.io/adapter-type"] ?? config.adapterType,
    grant: extra.grant ?? { allowFqdns: [], allowCidrs: [] },
    policy: extra.policy,
  });

  return defineSandboxProvider<typeof kubernetesConfigSchema, KubernetesHandle>({
    driverKey: KUBERNETES_DRIVER_KEY,
    config: kubernetesConfig,
    transport: KUBERNETES_SHAPE.transport,
    // An emptyDir the pod spec mounts: nothing to make.
    workspace: { existing: () => POD_PATHS.workspace, syncRoots: () => [POD_PATHS.home, POD_PATHS.tmp] },
    shape: (config) => ({
      backend: config.backend,
      adapterType: config.adapterType,
      image: config.image ?? null,
      imageRegistry: config.imageRegistry ?? null,
      runtimeClassName: config.runtimeClassName ?? null,
      cpu: [config.cpuRequest, config.cpuLimit],
      memory: [config.memoryRequest, config.memoryLimit],
      egressMode: config.egressMode,
    }),
    options: {
      commandTimeoutMs: (config) => config.timeoutMs,
      acquireBudgetMs: (config) => Math.max(10_000, Math.min(config.timeoutMs, (config.readyTimeoutSec + 60) * 1000) + 25_000),
    },
    // Kubernetes cannot pause a pod: a kept lease keeps its pod (and its emptyDir files) running.
    keep: { reusable: (config) => config.reuseLease, by: "leave-running" },
    egress: (config) => ({ allowFqdns: config.egressAllowFqdns, allowCidrs: config.egressAllowCidrs }),
    // Missing credentials are not a config error: a worker in a pod uses its service account, and
    // where the worker runs can change. Probe and acquire say so (below); validation, and so the
    // host's form, accept the config.
    validate: (config) => ({ errors: crossFieldProblems(config) }),
    leaseMetadata: (handle) => ({
      namespace: handle.ref.namespace,
      workload: handle.ref.name,
      kind: handle.ref.kind === "sandbox" ? "Sandbox" : "Job",
      apiVersion: handle.ref.kind === "sandbox" ? `agents.x-k8s.io/${handle.version}` : "batch/v1",
      backend: handle.ref.kind === "sandbox" ? "sandbox-cr" : "job",
      podName: handle.podName ?? null,
      image: handle.image,
      adapterType: handle.adapterType,
      egressPolicy: handle.policy ?? null,
      effectiveEgress: handle.grant,
      // The host keeps its base64 fallback for such leases instead of calling native sync.
      ...(handle.ref.kind === "job" ? { nativeFileSyncUnsupported: true, multiCommandExec: false } : {}),
    }),
    annotateStderr: (handle) => (stderr) => appendBlockedNetworkNote(stderr, handle.grant),

    async create({ config, params, labels, expiresAt, grant, signal, created }) {
      const missing = missingCredentials(config);
      if (missing) throw new Error(missing);
      const clients = clientsFor(config);
      const namespace = tenantNamespace(config, params.companyId);
      const kind: WorkloadRef["kind"] = config.backend === "job" ? "job" : "sandbox";
      const version = await versionFor(clients, kind, signal);
      const adapter = adapterFor((params as { adapterType?: string }).adapterType, config.adapterType);
      const image = config.image ?? withRegistry(adapter.defaults.image, config.imageRegistry);
      const effective = mergeEgressGrants(grant ?? { allowFqdns: [], allowCidrs: [] }, { allowFqdns: adapter.defaults.egressFqdns, allowCidrs: [] });
      await ensureTenant(clients, namespace, params.companyId, config, signal);

      const name = workloadName();
      const ref: WorkloadRef = { namespace, kind, name };
      const objectLabels = { ...MANAGED_BY, ...labels, [RUN_ID_LABEL]: labelValue(params.runId), [WORKLOAD_LABEL]: name };
      const secretName = `${name}-env`;
      const spec = podSpec({
        config,
        image,
        secretName,
        command: kind === "sandbox" ? (config.entrypoint.length ? config.entrypoint : DEFAULT_ENTRYPOINT) : config.jobCommand.length ? config.jobCommand : undefined,
        restartPolicy: kind === "sandbox" ? "Always" : "Never",
      });
      const input = { namespace, name, labels: objectLabels, spec };
      const manifest =
        kind === "sandbox"
          ? sandboxManifest(input, version, expiresAt)
          : (() => {
              const job = jobManifest(input, config);
              if (expiresAt) job.spec.activeDeadlineSeconds = Math.max(1, Math.min(config.podActivityDeadlineSec, Math.floor((expiresAt.getTime() - Date.now()) / 1000) - 2));
              return job;
            })();
      (manifest.metadata as Manifest).annotations = { "paperclip.io/image": image, "paperclip.io/adapter-type": adapter.type };
      const workload = await createWorkload(clients, ref, manifest, version, signal);
      created(leaseIds.encode(ref));
      const owner: OwnerRef = { apiVersion: kind === "sandbox" ? `agents.x-k8s.io/${version}` : "batch/v1", kind: kind === "sandbox" ? "Sandbox" : "Job", name, uid: workload.metadata.uid };
      const ownerRefs = [{ ...owner, controller: true, blockOwnerDeletion: true }];

      // The run's environment (the effective grant included), owned by the workload.
      const env = {
        ...egressEnv(effective, config.egressMode === "cilium" ? "kubernetes-cilium-fqdn" : "kubernetes-default-deny"),
        PAPERCLIP_NETWORK_EGRESS_GRANT_PATH: "executionWorkspaceSettings.networkEgress",
      };
      try {
        await call(
          "createSecret",
          true,
          () =>
            clients.core.createNamespacedSecret({ namespace, body: { metadata: { name: secretName, namespace, labels: objectLabels, ownerReferences: ownerRefs }, type: "Opaque", stringData: env } }),
          signal,
        );
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
      }

      // The run's own egress policy: if it cannot be made, the workload goes (the kit destroys what `created` named).
      let policy: string | undefined;
      if (effective.allowFqdns.length > 0 || effective.allowCidrs.length > 0) {
        policy = egressPolicyName(name);
        try {
          if (config.egressMode === "cilium") {
            const body = runCiliumPolicy(namespace, name, objectLabels, owner, effective);
            await call(
              "createCiliumNetworkPolicy",
              true,
              () => clients.custom.createNamespacedCustomObject({ group: "cilium.io", version: "v2", namespace, plural: "ciliumnetworkpolicies", body }),
              signal,
            );
          } else {
            const body = runNetworkPolicy(namespace, name, objectLabels, owner, effective);
            await call("createNetworkPolicy", true, () => clients.net.createNamespacedNetworkPolicy({ namespace, body }), signal);
          }
        } catch (error) {
          if (!isStatus(error, 409)) {
            await destroyWorkload(clients, ref, version).catch(() => undefined);
            throw new Error(`the run's egress policy ${namespace}/${policy} could not be created, so its ${kind} was released: ${(error as Error).message}`);
          }
        }
      }

      const pod = await waitForPod(clients, ref, {
        timeoutMs: config.readyTimeoutSec * 1000,
        signal,
        workloadProblem: async () => workloadProblem(await readWorkload(clients, ref, version), ref),
      });
      const current = (await readWorkload(clients, ref, version, signal)) ?? workload;
      const handle = handleOf(clients, ref, version, current, config, { podName: pod.metadata?.name, grant: effective, image, adapterType: adapter.type, policy });
      if (kind === "sandbox") await checkImageTools(podRunner(clients, namespace, handle.podName!, config.podActivityDeadlineSec * 1000), image);
      return handle;
    },

    async get(ref) {
      const workloadRef = leaseIds.tryDecode(ref.providerLeaseId);
      if (!workloadRef) return null;
      const clients = clientsFor(ref.config);
      const version = await versionFor(clients, workloadRef.kind).catch(() => (workloadRef.kind === "sandbox" ? "v1beta1" : "v1"));
      const workload = await readWorkload(clients, workloadRef, version);
      if (!workload) return null;
      const meta = ref.metadata as { effectiveEgress?: EgressGrant; podName?: string | null; egressPolicy?: string | null };
      const podName = meta.podName ?? (workloadRef.kind === "job" ? await jobPodName(clients, workloadRef).catch(() => undefined) : workloadRef.name);
      return handleOf(clients, workloadRef, version, workload, ref.config, { podName: podName ?? undefined, grant: meta.effectiveEgress, policy: meta.egressPolicy ?? undefined });
    },

    destroy: (_ref, handle) => destroyWorkload(handle.clients, handle.ref, handle.version),

    runner: (handle, config) =>
      handle.ref.kind === "job"
        ? jobRunner(handle.clients, handle.ref, KUBERNETES_SHAPE.transport)
        : podRunner(handle.clients, handle.ref.namespace, handle.podName ?? handle.ref.name, config.podActivityDeadlineSec * 1000, handle.providerLeaseId),

    list: (config, labels) => listWorkloads(clientsFor(config), config, labels),

    async probe(config, params) {
      let clients: KubeClients | undefined;
      const namespace = tenantNamespace(config, params.companyId);
      const missing = missingCredentials(config);
      const { ok, diagnostics } = await runProbeChecks(
        [
          { code: "config", name: "Configuration", run: () => (missing ? { ok: false, message: missing } : undefined) },
          {
            code: "api_reachable",
            name: "API server reachable",
            run: async () => {
              clients = clientsFor(config);
              const version = await call("getCode", true, () => clients!.kc.makeApiClient(VersionApi).getCode());
              return { ok: true, message: `Kubernetes ${version.gitVersion} at ${clients.server}` };
            },
          },
          {
            code: "agent_sandbox_served",
            name: "agent-sandbox served",
            requires: ["api_reachable"],
            run: async () => {
              if (config.backend === "job") return { ok: true, message: "backend job: agent-sandbox not needed" };
              return { ok: true, message: `agents.x-k8s.io/${await sandboxApiVersion(clients!)}` };
            },
          },
          {
            code: "cilium_served",
            name: "Cilium policies served",
            requires: ["api_reachable"],
            run: async () => {
              if (config.egressMode !== "cilium") return undefined;
              const groups = await call("getAPIVersions", true, () => clients!.apis.getAPIVersions());
              return (groups.groups ?? []).some((g) => g.name === "cilium.io")
                ? undefined
                : { ok: false, message: "egress mode cilium, but the cluster does not serve cilium.io (is Cilium installed?)" };
            },
          },
        ],
        { timeoutMs: 15_000 },
      );
      const failed = diagnostics.find((d) => d.severity === "error");
      return {
        ok,
        summary: ok
          ? `Kubernetes cluster ready — ${clients?.server ?? ""}, tenant namespace ${namespace}, backend ${config.backend}${config.backend === "job" ? " (no command execution, no native sync)" : ""}`
          : `Kubernetes: ${failed?.message ?? "probe failed"}`,
        diagnostics,
      };
    },
  });
}

export function createKubernetesPlugin(deps: KubernetesPluginDeps = {}) {
  return createKubernetesProvider(deps).plugin;
}

const provider = createKubernetesProvider();
/** For `paperclip-sandbox leases gc --provider kubernetes`: Sandboxes and Jobs by label, across every tenant namespace. */
export const listLeases = provider.listLeases;
export default provider.plugin;
