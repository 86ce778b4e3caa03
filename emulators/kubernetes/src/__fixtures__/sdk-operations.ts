// The operations of @kubernetes/client-node's generated APIs (dist/gen/apis/*Api.js, the request
// factories), read from the installed package, and whether the emulator's router routes each one.
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createRouter } from "@paperclip-sandbox/emulator-kit";
import { registerApiRoutes } from "../api-server.js";
import type { Cluster } from "../cluster.js";
import type { KubernetesOperation } from "../coverage.js";
import { EXEC_PROTOCOLS, registerExecRoute } from "../exec.js";
import { resourceTypes } from "../resources.js";

const APIS = fileURLToPath(new URL("../../../../node_modules/@kubernetes/client-node/dist/gen/apis/", import.meta.url));

export function kubernetesSdkOperations(): KubernetesOperation[] {
  const out: KubernetesOperation[] = [];
  for (const file of readdirSync(APIS)
    .filter((name) => name.endsWith("Api.js"))
    .sort()) {
    const factory = readFileSync(`${APIS}${file}`, "utf8").split("ResponseProcessor")[0]!;
    const group = file.replace(/\.js$/, "");
    for (const match of factory.matchAll(/\n {4}async (\w+)\([^)]*\) \{[\s\S]*?const localVarPath = '([^']*)'[\s\S]*?HttpMethod\.(\w+)\)/g)) {
      out.push({ group, name: match[1]!, method: match[3]!, path: match[2]!, route: `${match[3]} ${match[2]}` });
    }
  }
  return out;
}

/** A router with the emulator's routes over the default resource types (handlers are never called). */
export function routedBy(): (op: KubernetesOperation) => boolean {
  const router = createRouter();
  const cluster = { types: resourceTypes({ sandboxVersions: ["v1beta1", "v1alpha1"], cilium: true }) } as unknown as Cluster;
  registerApiRoutes(router, { cluster, token: "t", address: () => "127.0.0.1:1" });
  registerExecRoute(router, { cluster, token: "t", protocols: EXEC_PROTOCOLS });
  const sample: Record<string, string> = { namespace: "ns", name: "x", group: "agents.x-k8s.io", version: "v1beta1", plural: "sandboxes" };
  return (op) => {
    const path = op.path.replace(/\{(\w+)\}/g, (_, param: string) => sample[param] ?? "x");
    const http = router.match(op.method, path);
    return (http !== undefined && "route" in http) || (op.method === "GET" && router.matchWebSocket(path) !== undefined);
  };
}
