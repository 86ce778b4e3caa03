// The test server's admission and validation as a client sees them: Pod Security with the plugin's
// own message (also for a Sandbox's pod, reported as the controller's ReconcilerError), and
// malformed manifests failing as on a real cluster (namespace lifecycle, OpenAPI schema, field
// validation). Moved here from the kubernetes provider's tests: it tests the emulator.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as k8s from "@kubernetes/client-node";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "./index.js";

let emu: RunningEmulator;
let core: k8s.CoreV1Api;
let net: k8s.NetworkingV1Api;
let custom: k8s.CustomObjectsApi;
beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  const kc = new k8s.KubeConfig();
  kc.loadFromString(emu.credentials.kubeconfig!);
  core = kc.makeApiClient(k8s.CoreV1Api);
  net = kc.makeApiClient(k8s.NetworkingV1Api);
  custom = kc.makeApiClient(k8s.CustomObjectsApi);
});
afterAll(() => emu?.close());

describe("admission and validation by the test server", () => {
  it("refuses a pod that Pod Security restricted would not admit, with the real message", async () => {
    await core.createNamespace({ body: { metadata: { name: "psa-check", labels: { "pod-security.kubernetes.io/enforce": "restricted" } } } });
    const error = await core
      .createNamespacedPod({
        namespace: "psa-check",
        body: { metadata: { name: "root-pod" }, spec: { hostNetwork: true, containers: [{ name: "c", image: "busybox", securityContext: { privileged: true, runAsUser: 0 } }] } },
      })
      .catch((e) => e);
    expect(error.code).toBe(403);
    expect(JSON.parse(error.body).message).toBe(
      'pods "root-pod" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), runAsUser=0 (container "c" must not set runAsUser=0), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
    );
    // A Sandbox whose template would be refused reports it as the controller's ReconcilerError.
    const bad = (await custom.createNamespacedCustomObject({
      group: "agents.x-k8s.io",
      version: "v1beta1",
      namespace: "psa-check",
      plural: "sandboxes",
      body: { apiVersion: "agents.x-k8s.io/v1beta1", kind: "Sandbox", metadata: { name: "bad" }, spec: { podTemplate: { spec: { containers: [{ name: "c", image: "busybox" }] } } } },
    })) as { metadata: { name: string } };
    expect(bad.metadata.name).toBe("bad");
    await vi.waitFor(async () => {
      const status = (await custom.getNamespacedCustomObject({ group: "agents.x-k8s.io", version: "v1beta1", namespace: "psa-check", plural: "sandboxes", name: "bad" })) as {
        status?: { conditions?: Array<{ reason: string; message: string }> };
      };
      expect(status.status?.conditions?.[0]).toMatchObject({ reason: "ReconcilerError", message: expect.stringContaining('violates PodSecurity "restricted:latest"') });
    });
    await core.deleteNamespace({ name: "psa-check" });
  });

  it("a malformed manifest fails as on a real cluster (OpenAPI schema and field validation)", async () => {
    const typeError = await net
      .createNamespacedNetworkPolicy({ namespace: "default-missing", body: { metadata: { name: "x" }, spec: { podSelector: {}, egress: [{ ports: [{ port: 70000 }] }] } } as never })
      .catch((e) => e);
    expect(typeError.code).toBe(404); // namespace does not exist
    await core.createNamespace({ body: { metadata: { name: "schema-check" } } });
    const badPort = await net
      .createNamespacedNetworkPolicy({
        namespace: "schema-check",
        body: { metadata: { name: "x" }, spec: { podSelector: {}, egress: [{ ports: [{ port: 70000, protocol: "ICMP" }], to: [{ ipBlock: { cidr: "10.0.0.0/99" } }] }] } } as never,
      })
      .catch((e) => e);
    expect(badPort.code).toBe(422);
    expect(JSON.parse(badPort.body).message).toBe(
      'NetworkPolicy.networking.k8s.io "x" is invalid: [spec.egress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP", spec.egress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive, spec.egress[0].to[0].ipBlock.cidr: Invalid value: "10.0.0.0/99": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)]',
    );
    const wrongType = await core.createNamespacedSecret({ namespace: "schema-check", body: { metadata: { name: "s", labels: { a: 1 as unknown as string } } } }).catch((e) => e);
    expect(wrongType.code).toBe(400);
    expect(JSON.parse(wrongType.body).message).toMatch(/^Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field metadata\.labels\.a of type string$/);
    await core.deleteNamespace({ name: "schema-check" });
  });
});
