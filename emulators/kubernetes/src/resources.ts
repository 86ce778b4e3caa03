/** The API resources the emulator serves (what discovery lists and the routes are made from). */
export interface ResourceType {
  group: string;
  /** Versions served, preferred first (agent-sandbox may serve v1beta1 and v1alpha1). */
  versions: string[];
  /** Plural name, as in the URL. */
  resource: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  /** Sub-resources listed in discovery (`pods/log`, `pods/exec`, `jobs/status`). */
  subresources?: string[];
  /** Names are DNS labels (namespaces) rather than subdomains. */
  nameRule: "label" | "subdomain";
  /** A custom resource: list items carry apiVersion and kind. */
  custom?: boolean;
}

const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

export interface ServedApis {
  /** agent-sandbox versions served, preferred first (default both, v1beta1 first); [] for none. */
  sandboxVersions: string[];
  /** Whether cilium.io/v2 CiliumNetworkPolicy is served. */
  cilium: boolean;
}

export function resourceTypes(served: ServedApis): ResourceType[] {
  const types: ResourceType[] = [
    { group: "", versions: ["v1"], resource: "namespaces", singular: "namespace", kind: "Namespace", namespaced: false, shortNames: ["ns"], nameRule: "label", subresources: ["status"] },
    { group: "", versions: ["v1"], resource: "serviceaccounts", singular: "serviceaccount", kind: "ServiceAccount", namespaced: true, shortNames: ["sa"], nameRule: "subdomain" },
    { group: "", versions: ["v1"], resource: "secrets", singular: "secret", kind: "Secret", namespaced: true, nameRule: "subdomain" },
    { group: "", versions: ["v1"], resource: "pods", singular: "pod", kind: "Pod", namespaced: true, shortNames: ["po"], nameRule: "subdomain", subresources: ["exec", "log", "status"] },
    {
      group: "",
      versions: ["v1"],
      resource: "resourcequotas",
      singular: "resourcequota",
      kind: "ResourceQuota",
      namespaced: true,
      shortNames: ["quota"],
      nameRule: "subdomain",
      subresources: ["status"],
    },
    { group: "", versions: ["v1"], resource: "limitranges", singular: "limitrange", kind: "LimitRange", namespaced: true, shortNames: ["limits"], nameRule: "subdomain" },
    { group: "rbac.authorization.k8s.io", versions: ["v1"], resource: "roles", singular: "role", kind: "Role", namespaced: true, nameRule: "subdomain" },
    { group: "rbac.authorization.k8s.io", versions: ["v1"], resource: "rolebindings", singular: "rolebinding", kind: "RoleBinding", namespaced: true, nameRule: "subdomain" },
    { group: "networking.k8s.io", versions: ["v1"], resource: "networkpolicies", singular: "networkpolicy", kind: "NetworkPolicy", namespaced: true, shortNames: ["netpol"], nameRule: "subdomain" },
    { group: "batch", versions: ["v1"], resource: "jobs", singular: "job", kind: "Job", namespaced: true, nameRule: "subdomain", subresources: ["status"] },
  ];
  if (served.sandboxVersions.length > 0) {
    types.push({
      group: "agents.x-k8s.io",
      versions: served.sandboxVersions,
      resource: "sandboxes",
      singular: "sandbox",
      kind: "Sandbox",
      namespaced: true,
      shortNames: ["sandbox"],
      nameRule: "subdomain",
      subresources: ["status"],
      custom: true,
    });
  }
  if (served.cilium) {
    types.push({
      group: "cilium.io",
      versions: ["v2"],
      resource: "ciliumnetworkpolicies",
      singular: "ciliumnetworkpolicy",
      kind: "CiliumNetworkPolicy",
      namespaced: true,
      shortNames: ["cnp", "ciliumnp"],
      nameRule: "subdomain",
      subresources: ["status"],
      custom: true,
    });
  }
  return types;
}

export function typeKey(type: Pick<ResourceType, "group" | "resource">): string {
  return `${type.group || "core"}/${type.resource}`;
}

export function apiVersionOf(type: ResourceType, version = type.versions[0]!): string {
  return type.group ? `${type.group}/${version}` : version;
}

/** The `APIResourceList` of one group version. */
export function resourceList(types: ResourceType[], group: string, version: string): Record<string, unknown> {
  const resources: Record<string, unknown>[] = [];
  for (const t of types.filter((t) => t.group === group && t.versions.includes(version))) {
    resources.push({ name: t.resource, singularName: t.singular, namespaced: t.namespaced, kind: t.kind, verbs: VERBS, ...(t.shortNames ? { shortNames: t.shortNames } : {}) });
    for (const sub of t.subresources ?? []) {
      const verbs = sub === "exec" ? ["create", "get"] : sub === "log" ? ["get"] : ["get", "patch", "update"];
      resources.push({ name: `${t.resource}/${sub}`, singularName: "", namespaced: t.namespaced, kind: sub === "exec" ? "PodExecOptions" : sub === "log" ? "Pod" : t.kind, verbs });
    }
  }
  return { kind: "APIResourceList", apiVersion: "v1", groupVersion: group ? `${group}/${version}` : version, resources };
}

export function groupList(types: ResourceType[]): Record<string, unknown> {
  const groups = new Map<string, string[]>();
  for (const t of types) {
    if (!t.group) continue;
    const versions = groups.get(t.group) ?? [];
    for (const v of t.versions) if (!versions.includes(v)) versions.push(v);
    groups.set(t.group, versions);
  }
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [...groups].map(([name, versions]) => groupOf(name, versions)),
  };
}

export function groupOf(name: string, versions: string[]): Record<string, unknown> {
  return {
    name,
    versions: versions.map((version) => ({ groupVersion: `${name}/${version}`, version })),
    preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] },
  };
}
