import type { ListedResource } from "@paperclip-sandbox/kit";
import type { KubernetesConfig } from "./config.js";
import { call, type KubeClients } from "./kube.js";
import { leaseIds, type WorkloadRef } from "./names.js";
import { expiryOf, sandboxApiVersion, SANDBOX_GROUP } from "./workload.js";

type Manifest = Record<string, any>;

/** This provider's Sandboxes and Jobs carrying every label, across all namespaces (cluster-wide lists). */
export async function listWorkloads(clients: KubeClients, config: KubernetesConfig, labels: Record<string, string>): Promise<ListedResource[]> {
  const labelSelector = Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(",");
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
