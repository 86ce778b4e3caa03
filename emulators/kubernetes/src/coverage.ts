import type { CoverageEntry, CoverageSpec, SdkOperation } from "@paperclip-sandbox/emulator-kit";

/** An operation of client-node's generated APIs, with its HTTP method and path template. */
export interface KubernetesOperation extends SdkOperation {
  method: string;
  path: string;
}

const SERVED_RESOURCES =
  "namespaces, pods (status, log, exec), secrets, service accounts, resource quotas, limit ranges, RBAC roles and role bindings, network policies, jobs, agent-sandbox Sandboxes and Cilium network policies";

/**
 * Why an operation the router does not serve is refused, by its path: the reasons the README's
 * limits give, first match wins.
 */
export const KUBERNETES_COVERAGE_RULES: ReadonlyArray<{ test: (op: KubernetesOperation) => boolean; reason: string }> = [
  { test: (op) => /\/proxy(\/|$)/.test(op.path), reason: "no proxying: jails have no network" },
  { test: (op) => /\/attach$/.test(op.path), reason: "no attach (exec is served)" },
  { test: (op) => /\/portforward$/.test(op.path), reason: "no port-forward: jails have no network" },
  { test: (op) => /\/(eviction|binding|ephemeralcontainers|resize)$/.test(op.path), reason: "one node and no scheduler: no binding, eviction, ephemeral containers or resize" },
  { test: (op) => /\/scale$/.test(op.path), reason: "no scale sub-resource" },
  { test: (op) => /\/serviceaccounts\/\{name\}\/token$/.test(op.path), reason: "no service-account tokens (one admin token)" },
  { test: (op) => /^\/(\.well-known|openid)\//.test(op.path), reason: "no service-account token issuer" },
  { test: (op) => /^\/logs(\/|$)/.test(op.path), reason: "no node logs" },
  { test: (op) => op.method === "DELETE" && !/\{name\}$/.test(op.path), reason: "no deletecollection" },
  { test: (op) => op.group === "CustomObjectsApi" && !op.path.includes("/namespaces/"), reason: "the served custom resources (Sandbox, CiliumNetworkPolicy) are namespaced" },
  { test: () => true, reason: `not emulated: the API serves ${SERVED_RESOURCES}` },
];

/** The entry for one operation: served when the emulator's router routes it, else the first matching rule. */
function classifyKubernetesOperation(op: KubernetesOperation, routed: boolean): CoverageEntry {
  if (routed) {
    if (/\/exec$/.test(op.path))
      return { status: "served", reason: op.method === "GET" ? "WebSocket, v5 and v4 channel protocols; no TTY" : "answers that an upgrade is required (WebSocket exec is served)" };
    if (op.method === "PATCH") return { status: "served", reason: "strategic merge patches replace lists" };
    return { status: "served" };
  }
  return { status: "refused", reason: KUBERNETES_COVERAGE_RULES.find((rule) => rule.test(op))!.reason };
}

/**
 * The coverage spec of client-node's generated APIs: per operation for every API class with at
 * least one served operation, one refused row for each class with none.
 */
export function kubernetesCoverage(operations: readonly KubernetesOperation[], routed: (op: KubernetesOperation) => boolean): CoverageSpec {
  const entries = new Map<string, { op: KubernetesOperation; entry: CoverageEntry }>();
  for (const op of operations) entries.set(`${op.group}.${op.name}`, { op, entry: classifyKubernetesOperation(op, routed(op)) });
  const servedGroups = new Set([...entries.values()].filter(({ entry }) => entry.status === "served").map(({ op }) => op.group));
  const spec: CoverageSpec = { operations: {}, refusedGroups: {} };
  for (const [key, { op, entry }] of entries) {
    if (servedGroups.has(op.group)) spec.operations[key] = entry;
    else spec.refusedGroups![op.group] = `not emulated: the API serves ${SERVED_RESOURCES}`;
  }
  return spec;
}
