// The kubernetes provider (sandbox-cr backend) through the whole conformance suite: the built
// worker, forked as the host does, driving the real @kubernetes/client-node against the in-repo
// Kubernetes API test server, whose pods are bubblewrap jails.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-kubernetes";
import { describeConformance } from "@paperclip-sandbox/conformance";
import * as k8s from "@kubernetes/client-node";

const pluginDir = fileURLToPath(new URL("..", import.meta.url));
const emu: RunningEmulator = await runEmulator(emulator, {});
afterAll(() => emu.close());

const config = { kubeconfig: emu.credentials.kubeconfig!, timeoutMs: 60_000, readyTimeoutSec: 60 };

const kc = new k8s.KubeConfig();
kc.loadFromString(emu.credentials.kubeconfig!);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);

beforeAll(() => emu.requests.reset());

// Both paths: every command over the kit's command channel, and every command a pod exec of its own.
for (const channel of ["always", "off"] as const) {
  describeConformance({
    name: `kubernetes, command channel ${channel}`,
    workerEnv: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    pluginDir,
    driverKey: "kubernetes",
    config,
    invalidConfigs: [
      { config: { timeoutMs: -5, kubeconfig: "x" }, error: /Command timeout \(ms\): must be at least 1/ },
      { config: { inCluster: true, kubeconfig: "x" }, error: /Credentials: set exactly one of In-cluster credentials, Kubeconfig or Kubeconfig secret \(2 set\)/ },
      { config: { kubeconfig: "x", backend: "pods" }, error: /^Backend: / },
      { config: { kubeconfig: "x", egressAllowCidrs: ["10.0.0.0"] }, error: /Allowed IP ranges.*must be a CIDR/ },
      { config: { kubeconfig: "x", image: "docker.io/evil:latest" }, error: /Image override: docker\.io\/evil:latest is not in the image allow-list/ },
      { config: { kubeconfig: "x", backend: "job", reuseLease: true }, error: /the job backend cannot keep a lease/ },
    ],
    reuseConfig: { ...config, reuseLease: true },
    leftovers: async () =>
      (await emu.leftovers()).filter((entry) => !/^(serviceaccounts|roles|rolebindings|resourcequotas|limitranges|networkpolicies|ciliumnetworkpolicies)\/[^/]+\/paperclip-/.test(entry)),
    labelsOf: async (providerLeaseId) => {
      const m = /^k8s-([^/]+)\/sandbox\/(.+)$/.exec(providerLeaseId);
      if (!m) return undefined;
      const sandbox = (await custom.getNamespacedCustomObject({ group: "agents.x-k8s.io", version: "v1beta1", namespace: m[1]!, plural: "sandboxes", name: m[2]! }).catch(() => undefined)) as
        | { metadata?: { labels?: Record<string, string> } }
        | undefined;
      return sandbox?.metadata?.labels;
    },
    faults: {
      // The first call after the Sandbox exists (the per-run Secret) fails for good.
      failAfterCreate: async () => {
        emu.faults.inject({ kind: "status", status: 500, route: "/api/v1/namespaces/:namespace/secrets", method: "POST", times: 10 });
      },
      transient: async (kind, count) => {
        emu.faults.inject(kind === "429" ? { kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 0 } : { kind: "status", status: 503, route: "*", times: count });
      },
      reset: async () => emu.faults.clear(),
    },
  });
}
