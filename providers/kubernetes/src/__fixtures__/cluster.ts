// One test server plus the plugin in-process (hooks called directly, as the host calls them).
import type { PluginDefinition, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { hostFor, type InProcessHost } from "@paperclip-sandbox/conformance";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, type Cluster, type KubernetesEmulatorOptions } from "@paperclip-sandbox/emulator-kubernetes";
import * as k8s from "@kubernetes/client-node";
import { createKubernetesPlugin } from "../plugin.js";

export interface TestCluster {
  emu: RunningEmulator;
  cluster: Cluster;
  kc: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  net: k8s.NetworkingV1Api;
  custom: k8s.CustomObjectsApi;
  batch: k8s.BatchV1Api;
  config: Record<string, unknown>;
  close(): Promise<void>;
}

export async function startTestCluster(options: KubernetesEmulatorOptions = {}, config: Record<string, unknown> = {}): Promise<TestCluster> {
  let cluster: Cluster | undefined;
  const emu = await runEmulator(emulator, { options: { ...options, expose: (c) => (cluster = c) } });
  const kc = new k8s.KubeConfig();
  kc.loadFromString(emu.credentials.kubeconfig!);
  return {
    emu,
    cluster: cluster!,
    kc,
    core: kc.makeApiClient(k8s.CoreV1Api),
    net: kc.makeApiClient(k8s.NetworkingV1Api),
    custom: kc.makeApiClient(k8s.CustomObjectsApi),
    batch: kc.makeApiClient(k8s.BatchV1Api),
    config: { kubeconfig: emu.credentials.kubeconfig, timeoutMs: 60_000, readyTimeoutSec: 60, ...config },
    close: () => emu.close(),
  };
}

export const scope = { driverKey: "kubernetes", companyId: "acme-corp", environmentId: "env-1" };
const identity = { companyId: scope.companyId, environmentId: scope.environmentId, agentId: "agent-1", executionWorkspaceId: "ws-1" };
const hosts = new WeakMap<object, InProcessHost>();

/** The plugin in process, set up as the host does; `logs` is the live output it streamed. */
export async function startPlugin() {
  const host = hostFor(createKubernetesPlugin(), {}, { driverKey: scope.driverKey, identity });
  const hooks = (await host.hooks()) as Required<PluginDefinition>;
  hosts.set(hooks, host);
  return { hooks, logs: host.executionLog };
}

export type Hooks = Awaited<ReturnType<typeof startPlugin>>["hooks"];

export async function acquire(hooks: Hooks, config: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const run = hosts.get(hooks)!.withConfig(config);
  const lease = await run.acquire({ runId: "run-1", adapterType: "claude_local", ...extra });
  const exec = (command: string, args: string[] = [], more: Record<string, unknown> = {}) => run.execute(lease, command, args, more);
  const release = () => run.release(lease);
  return { lease, exec, release, ...split(lease) };
}

export function split(lease: PluginEnvironmentLease) {
  const m = /^k8s-([^/]+)\/(sandbox|job)\/(.+)$/.exec(lease.providerLeaseId ?? "");
  if (!m) throw new Error(`not a kubernetes lease id: ${lease.providerLeaseId}`);
  return { namespace: m[1]!, name: m[3]! };
}

/** The object without the server-set fields, for exact comparisons. */
export function plain<T extends object>(obj: T): T {
  const json = JSON.parse(JSON.stringify(obj));
  for (const key of ["uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"]) delete json.metadata?.[key];
  return json;
}
