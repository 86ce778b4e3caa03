// The Kubernetes API test server: the subset of the API the kubernetes provider uses, with real
// discovery, validation against the official OpenAPI schemas, Pod Security admission, owner
// references, the agent-sandbox and Job controllers, and pods that are bubblewrap jails.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkTimeScale, createRouter, createVendorClock, type EmulatorDefinition, type VendorClock } from "@paperclip-sandbox/emulator-kit";
import { registerApiRoutes } from "./api-server.js";
import { Cluster } from "./cluster.js";
export type { Propagation } from "./cluster.js";
export type { ObjectStore, StoreEvent } from "./store.js";
import { EXEC_PROTOCOLS, registerExecRoute } from "./exec.js";
import { resourceTypes } from "./resources.js";
import { statusBody } from "./status.js";

export interface KubernetesEmulatorOptions {
  /** agent-sandbox versions served, preferred first (default ["v1beta1", "v1alpha1"]; [] serves none). */
  sandboxVersions?: string[];
  /** Serve cilium.io/v2 CiliumNetworkPolicy (default true). */
  cilium?: boolean;
  /** Exec sub-protocols served, preferred first (default v5 then v4; ["v4.channel.k8s.io"] emulates a cluster before 1.30). */
  execProtocols?: string[];
  /** Vendor ms per real ms (the kit's one meaning; default 1): durations (deadlines, TTLs, back-offs) run this much faster. */
  timeScale?: number;
  /** The cluster's clock itself (a test's `createManualClock()`): timestamps, shutdownTime and durations run on it. */
  clock?: VendorClock;
  /** Controller tick for time-based work, real ms (default 100). */
  tickMs?: number;
  /** The main process of a container that names no command (default `sleep infinity`). */
  defaultCommand?: string[];
  port?: number;
  /** Hands the emulated cluster to the caller (tests and the e2e read its store and leftovers directly). */
  expose?: (cluster: Cluster) => void;
}

export { Cluster } from "./cluster.js";
export { podSecurityViolations } from "./admission.js";
export { KUBERNETES_COVERAGE_RULES } from "./coverage.js";
export { EMULATED_VERSION } from "./api-server.js";
export { EXEC_PROTOCOLS } from "./exec.js";

/**
 * A kubeconfig (JSON is YAML) for the emulator: what the provider and kubectl read. Over https with
 * the emulator's CA inline (kubectl sends no bearer token over plain http); over http it declares
 * TLS verification off, which client-node requires for an http server.
 */
export function kubeconfigFor(url: string, token: string, caPem?: string): string {
  const cluster = caPem ? { server: url, "certificate-authority-data": Buffer.from(caPem).toString("base64") } : { server: url, "insecure-skip-tls-verify": true };
  return JSON.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "paperclip-emulator", cluster }],
      users: [{ name: "paperclip-admin", user: { token } }],
      contexts: [{ name: "paperclip-emulator", context: { cluster: "paperclip-emulator", user: "paperclip-admin" } }],
      "current-context": "paperclip-emulator",
      preferences: {},
    },
    null,
    2,
  );
}

export const emulator: EmulatorDefinition<KubernetesEmulatorOptions> = {
  name: "kubernetes",
  description: "Kubernetes API server subset (agent-sandbox, Jobs, NetworkPolicy, Cilium, pod exec); pods are bubblewrap jails",
  async start(kit, options) {
    const token = kit.credential("k8s-");
    const { backend } = await kit.backend({ prefix: "k8s-emu" });
    const clock = options.clock ?? createVendorClock({ timeScale: checkTimeScale(options.timeScale, "kubernetes emulator timeScale") });
    const cluster = new Cluster({
      types: resourceTypes({ sandboxVersions: options.sandboxVersions ?? ["v1beta1", "v1alpha1"], cilium: options.cilium ?? true }),
      backend,
      clock,
      tickMs: options.tickMs ?? 100,
      defaultCommand: options.defaultCommand ?? ["sleep", "infinity"],
    });
    kit.onClose(() => cluster.close());
    options.expose?.(cluster);
    const router = createRouter({ errorEnvelope: statusBody, bodyLimit: 3 * 1024 * 1024 });
    let address = "127.0.0.1:0";
    registerApiRoutes(router, { cluster, token, address: () => address });
    registerExecRoute(router, { cluster, token, protocols: options.execProtocols ?? [...EXEC_PROTOCOLS] });
    // One port: https (what the kubeconfig names) and plain http.
    const http = await kit.http(router, { port: options.port, tls: true });
    address = new URL(http.url).host;
    const url = http.secureUrl!.replace(/\/$/, "");
    const kubeconfig = kubeconfigFor(url, token, http.certificate!.certPem);
    const dir = await mkdtemp(join(tmpdir(), "k8s-emu-kubeconfig-"));
    kit.onClose(() => rm(dir, { recursive: true, force: true }));
    const kubeconfigPath = join(dir, "kubeconfig");
    await writeFile(kubeconfigPath, kubeconfig, { mode: 0o600 });
    return {
      url,
      endpoints: { http: http.url.replace(/\/$/, "") },
      credentials: { token, kubeconfig, kubeconfigPath, kubeconfigHttp: kubeconfigFor(http.url.replace(/\/$/, ""), token) },
      env: { KUBECONFIG: kubeconfigPath },
      leftovers: async () => cluster.leftovers(),
    };
  },
};
