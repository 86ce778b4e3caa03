// A company's tenant namespace and its baseline objects, made lazily and idempotently: each object
// is created; one that exists already is compared and replaced only when it differs. Done once per
// worker per tenant shape (then no calls at all).
import { createHash } from "node:crypto";
import { labelValue } from "@paperclip-sandbox/kit";
import type { KubernetesConfig } from "./config.js";
import { call, isStatus, type KubeClients } from "./kube.js";
import { tenantNamespaceManifest, tenantObjects } from "./manifests.js";

type Manifest = Record<string, any>;

interface KindApi {
  create(ns: string, body: Manifest): Promise<unknown>;
  read(ns: string, name: string): Promise<Manifest>;
  replace(ns: string, name: string, body: Manifest): Promise<unknown>;
}

function kindApis(c: KubeClients): Record<string, KindApi> {
  return {
    ServiceAccount: {
      create: (namespace, body) => c.core.createNamespacedServiceAccount({ namespace, body }),
      read: (namespace, name) => c.core.readNamespacedServiceAccount({ namespace, name }) as Promise<Manifest>,
      replace: (namespace, name, body) => c.core.replaceNamespacedServiceAccount({ namespace, name, body }),
    },
    Role: {
      create: (namespace, body) => c.rbac.createNamespacedRole({ namespace, body: body as never }),
      read: (namespace, name) => c.rbac.readNamespacedRole({ namespace, name }) as Promise<Manifest>,
      replace: (namespace, name, body) => c.rbac.replaceNamespacedRole({ namespace, name, body: body as never }),
    },
    RoleBinding: {
      create: (namespace, body) => c.rbac.createNamespacedRoleBinding({ namespace, body: body as never }),
      read: (namespace, name) => c.rbac.readNamespacedRoleBinding({ namespace, name }) as Promise<Manifest>,
      replace: (namespace, name, body) => c.rbac.replaceNamespacedRoleBinding({ namespace, name, body: body as never }),
    },
    ResourceQuota: {
      create: (namespace, body) => c.core.createNamespacedResourceQuota({ namespace, body }),
      read: (namespace, name) => c.core.readNamespacedResourceQuota({ namespace, name }) as Promise<Manifest>,
      replace: (namespace, name, body) => c.core.replaceNamespacedResourceQuota({ namespace, name, body }),
    },
    LimitRange: {
      create: (namespace, body) => c.core.createNamespacedLimitRange({ namespace, body }),
      read: (namespace, name) => c.core.readNamespacedLimitRange({ namespace, name }) as Promise<Manifest>,
      replace: (namespace, name, body) => c.core.replaceNamespacedLimitRange({ namespace, name, body }),
    },
    NetworkPolicy: {
      create: (namespace, body) => c.net.createNamespacedNetworkPolicy({ namespace, body }),
      read: (namespace, name) => c.net.readNamespacedNetworkPolicy({ namespace, name }) as Promise<Manifest>,
      replace: (namespace, name, body) => c.net.replaceNamespacedNetworkPolicy({ namespace, name, body }),
    },
    CiliumNetworkPolicy: {
      create: (namespace, body) => c.custom.createNamespacedCustomObject({ group: "cilium.io", version: "v2", namespace, plural: "ciliumnetworkpolicies", body }),
      read: (namespace, name) => c.custom.getNamespacedCustomObject({ group: "cilium.io", version: "v2", namespace, plural: "ciliumnetworkpolicies", name }) as Promise<Manifest>,
      replace: (namespace, name, body) => c.custom.replaceNamespacedCustomObject({ group: "cilium.io", version: "v2", namespace, plural: "ciliumnetworkpolicies", name, body }),
    },
  };
}

/** The fields that carry an object's meaning (what a drifted copy is compared on). */
function essence(m: Manifest): string {
  const { spec, rules, roleRef, subjects, automountServiceAccountToken } = m;
  // client-node returns objects with undefined fields dropped in JSON: normalise through JSON.
  return JSON.stringify(JSON.parse(JSON.stringify({ labels: m.metadata?.labels ?? {}, annotations: m.metadata?.annotations ?? {}, spec, rules, roleRef, subjects, automountServiceAccountToken })));
}

function covers(actual: Manifest, desired: Manifest): boolean {
  const a = JSON.parse(essence(actual));
  const d = JSON.parse(essence(desired));
  const subset = (x: any, y: any): boolean =>
    y === undefined ||
    (y !== null && typeof y === "object" && !Array.isArray(y) ? x !== null && typeof x === "object" && Object.keys(y).every((k) => subset(x[k], y[k])) : JSON.stringify(x) === JSON.stringify(y));
  return subset(a, d);
}

function ciliumMissing(error: unknown): boolean {
  return isStatus(error, 404);
}

/** Ensures the tenant (cached per worker); a Cilium policy on a cluster without Cilium is a clear error. */
export function ensureTenant(clients: KubeClients, namespace: string, companyId: string, config: KubernetesConfig, signal?: AbortSignal): Promise<unknown> {
  const input = { namespace, companyLabel: labelValue(companyId), config };
  const ns = tenantNamespaceManifest(input);
  const objects = tenantObjects(input);
  const key = `tenant:${namespace}:${createHash("sha256")
    .update(JSON.stringify([ns, objects]))
    .digest("hex")}`;
  return clients.cache.get(key, async () => {
    try {
      await call("createNamespace", true, () => clients.core.createNamespace({ body: ns }), signal);
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
      const current = (await call("readNamespace", true, () => clients.core.readNamespace({ name: namespace }), signal)) as Manifest;
      if (current.metadata?.deletionTimestamp) throw new Error(`tenant namespace ${namespace} is being deleted; try again once it is gone`);
      if (!covers(current, ns)) {
        await call(
          "replaceNamespace",
          true,
          () => clients.core.replaceNamespace({ name: namespace, body: { ...current, metadata: { ...current.metadata, labels: { ...current.metadata?.labels, ...ns.metadata.labels } } } }),
          signal,
        );
      }
    }
    const apis = kindApis(clients);
    for (const { kind, manifest } of objects) {
      const api = apis[kind]!;
      const name = manifest.metadata.name as string;
      try {
        await call(`create${kind}`, true, () => api.create(namespace, manifest), signal);
      } catch (error) {
        if (kind === "CiliumNetworkPolicy" && ciliumMissing(error)) {
          throw new Error(`Egress mode cilium: the cluster does not serve cilium.io/v2 CiliumNetworkPolicy (is Cilium installed?); use egress mode standard`);
        }
        if (!isStatus(error, 409)) throw error;
        const current = await call(`read${kind}`, true, () => api.read(namespace, name), signal);
        if (!covers(current, manifest)) {
          await call(`replace${kind}`, true, () => api.replace(namespace, name, { ...manifest, metadata: { ...manifest.metadata, resourceVersion: current.metadata?.resourceVersion } }), signal);
        }
      }
    }
  });
}
