// What the provider writes to the cluster, asserted on the objects the test server stored: the
// tenant baseline, the pod's security context, the per-run Secret and policies (both egress modes,
// both standard fallbacks), cascade deletion, the rollback when the run's policy cannot be made,
// and agent-sandbox version discovery. (The test server's own admission and validation are tested
// in emulators/kubernetes/src/admission.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acquire, plain, scope, startPlugin, startTestCluster, type TestCluster } from "./__fixtures__/cluster.js";
import { NON_PUBLIC_IPV4 } from "./egress.js";

let t: TestCluster;
beforeAll(async () => {
  t = await startTestCluster();
});
afterAll(() => t.close());

const grant = (allowFqdns: string[], allowCidrs: string[] = []) => ({ executionWorkspaceSettings: { networkEgress: { allowFqdns, allowCidrs } } });

describe("tenant and per-run objects (standard egress)", () => {
  it("creates the tenant baseline once, a hardened pod, and the run's Secret and policy; release removes every run object", async () => {
    const { hooks } = await startPlugin();
    const mark = t.emu.requests.mark();
    const a = await acquire(hooks, t.config, grant(["github.com"]));
    expect(a.namespace).toBe("paperclip-acme-corp");
    const ns = await t.core.readNamespace({ name: a.namespace });
    expect(ns.metadata?.labels).toMatchObject({
      "pod-security.kubernetes.io/enforce": "restricted",
      "pod-security.kubernetes.io/enforce-version": "latest",
      "app.kubernetes.io/managed-by": "paperclip",
      "paperclip-company": "acme-corp",
    });

    const sa = await t.core.readNamespacedServiceAccount({ namespace: a.namespace, name: "paperclip-tenant-sa" });
    expect(sa.automountServiceAccountToken).toBe(false);
    const role = await t.kc.makeApiClient((await import("@kubernetes/client-node")).RbacAuthorizationV1Api).readNamespacedRole({ namespace: a.namespace, name: "paperclip-tenant-role" });
    expect(role.rules).toEqual([{ apiGroups: [""], resources: ["pods/log"], verbs: ["get"] }]);
    const quota = await t.core.readNamespacedResourceQuota({ namespace: a.namespace, name: "paperclip-quota" });
    expect(quota.spec?.hard).toEqual({ pods: "20", "requests.cpu": "10", "requests.memory": "20Gi", "limits.cpu": "20", "limits.memory": "40Gi" });
    await t.core.readNamespacedLimitRange({ namespace: a.namespace, name: "paperclip-limits" });
    const denyAll = await t.net.readNamespacedNetworkPolicy({ namespace: a.namespace, name: "paperclip-deny-all" });
    expect(plain(denyAll).spec).toEqual({ podSelector: {}, policyTypes: ["Ingress", "Egress"] });
    const allow = await t.net.readNamespacedNetworkPolicy({ namespace: a.namespace, name: "paperclip-egress-allow" });
    expect(JSON.parse(JSON.stringify(allow.spec))).toEqual({
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [
        {
          to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
          ports: [
            { protocol: "UDP", port: 53 },
            { protocol: "TCP", port: 53 },
          ],
        },
        {
          to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "paperclip" } }, podSelector: { matchLabels: { "app.kubernetes.io/name": "paperclip" } } }],
          ports: [{ protocol: "TCP", port: 3100 }],
        },
      ],
    });

    // The pod: named after the Sandbox, owned by it, hardened.
    const pod = await t.core.readNamespacedPod({ namespace: a.namespace, name: a.name });
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({ kind: "Sandbox", name: a.name, controller: true });
    expect(pod.metadata?.labels).toMatchObject({ "paperclip.io/run-id": "run-1", "paperclip.io/workload": a.name, "paperclip-provider": "kubernetes", "paperclip-company": "acme-corp" });
    expect(JSON.parse(JSON.stringify(pod.spec?.securityContext))).toEqual({
      runAsUser: 1000,
      runAsGroup: 1000,
      runAsNonRoot: true,
      fsGroup: 1000,
      fsGroupChangePolicy: "OnRootMismatch",
      seccompProfile: { type: "RuntimeDefault" },
    });
    const container = pod.spec!.containers[0]!;
    expect(container.image).toBe("ghcr.io/paperclipai/agent-runtime-claude:v1");
    expect(JSON.parse(JSON.stringify(container.securityContext))).toEqual({
      runAsUser: 1000,
      runAsGroup: 1000,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(container.volumeMounts?.map((m) => m.mountPath)).toEqual(["/workspace", "/home/sandbox", "/home/sandbox/.cache", "/tmp"]);
    expect(pod.spec?.volumes?.every((v) => v.emptyDir !== undefined)).toBe(true);
    expect(pod.spec?.automountServiceAccountToken).toBe(false);

    // The run's Secret carries the effective grant, and the sandbox sees it.
    const secret = await t.core.readNamespacedSecret({ namespace: a.namespace, name: `${a.name}-env` });
    expect(secret.metadata?.ownerReferences?.[0]).toMatchObject({ kind: "Sandbox", name: a.name });
    const env = await a.exec("sh", ["-c", "echo $PAPERCLIP_NETWORK_EGRESS_ALLOW_FQDNS; id -u; touch /usr/x 2>&1 | head -1"]);
    expect(env.stdout.split("\n")[0]).toBe("github.com,api.anthropic.com");
    expect(env.stdout.split("\n")[1]).toBe("1000");
    expect(env.stdout).toMatch(/Read-only file system/);

    // FQDNs only: public IPv4 on 80/443 with the non-public ranges carved out, this pod only.
    const runPolicy = await t.net.readNamespacedNetworkPolicy({ namespace: a.namespace, name: `${a.name}-egress` });
    expect(runPolicy.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: "Sandbox",
      name: a.name,
      uid: ((await t.custom.getNamespacedCustomObject({ group: "agents.x-k8s.io", version: "v1beta1", namespace: a.namespace, plural: "sandboxes", name: a.name })) as { metadata: { uid: string } })
        .metadata.uid,
    });
    expect(JSON.parse(JSON.stringify(runPolicy.spec))).toEqual({
      podSelector: { matchLabels: { "paperclip.io/workload": a.name } },
      policyTypes: ["Egress"],
      egress: [
        {
          to: [{ ipBlock: { cidr: "0.0.0.0/0", except: NON_PUBLIC_IPV4 } }],
          ports: [
            { protocol: "TCP", port: 80 },
            { protocol: "TCP", port: 443 },
          ],
        },
      ],
    });
    expect(NON_PUBLIC_IPV4).toEqual(["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4"]);

    // A blocked connection's stderr carries the grant note.
    const blocked = await a.exec("sh", ["-c", "echo 'curl: (6) Could not resolve host: example.org' >&2; exit 6"]);
    expect(blocked.stderr).toMatch(/\[paperclip\] this looks like a blocked network call.*allowFqdns=\[github\.com, api\.anthropic\.com\]/);

    const acquireCalls = t.emu.requests.list({ since: mark }).length;
    expect(acquireCalls).toBeGreaterThan(0);

    // Release: receipt only after the Sandbox is gone, and with it (foreground) the pod, Secret, policy.
    const receipt = await a.release();
    expect(receipt).toMatchObject({ providerLeaseId: a.lease.providerLeaseId, state: "destroyed" });
    const leftovers = (await t.emu.leftovers()).filter((e) => e.includes(a.name));
    expect(leftovers).toEqual([]);

    // A second acquire in the same worker makes no tenant calls.
    const mark2 = t.emu.requests.mark();
    const b = await acquire(hooks, t.config, grant(["github.com"], ["203.0.113.0/24"]));
    const tenantCalls = t.emu.requests
      .list({ since: mark2 })
      .filter((r) => /paperclip-(tenant|quota|limits|deny-all|egress-allow)|\/namespaces$/.test(r.path) || /(serviceaccounts|roles|rolebindings|resourcequotas|limitranges)$/.test(r.path));
    expect(tenantCalls).toEqual([]);
    // FQDNs with CIDRs: only the CIDRs, no port restriction.
    const cidrPolicy = await t.net.readNamespacedNetworkPolicy({ namespace: b.namespace, name: `${b.name}-egress` });
    expect(JSON.parse(JSON.stringify(cidrPolicy.spec?.egress))).toEqual([{ to: [{ ipBlock: { cidr: "203.0.113.0/24" } }] }]);
    await b.release();
  });

  it("a policy that cannot be created releases the claimed Sandbox and fails the acquire", async () => {
    const { hooks } = await startPlugin();
    await acquire(hooks, t.config).then((a) => a.release()); // tenant ready first
    t.emu.faults.inject({ kind: "status", status: 500, route: "/apis/networking.k8s.io/v1/namespaces/:namespace/networkpolicies", method: "POST", times: 20 });
    try {
      await expect(acquire(hooks, t.config, grant(["github.com"]))).rejects.toThrow(
        /the run's egress policy paperclip-acme-corp\/pc-[0-9a-z]{26}-egress could not be created, so its sandbox was released/,
      );
    } finally {
      t.emu.faults.clear();
    }
    const sandboxes = (await t.custom.listNamespacedCustomObject({ group: "agents.x-k8s.io", version: "v1beta1", namespace: "paperclip-acme-corp", plural: "sandboxes" })) as { items: unknown[] };
    expect(sandboxes.items).toEqual([]);
    expect((await t.emu.leftovers()).filter((e) => /pc-/.test(e))).toEqual([]);
  });
});

describe("cilium egress mode", () => {
  it("a tenant FQDN policy and a per-run policy with exact names on 443 and a CIDR set", async () => {
    const { hooks } = await startPlugin();
    const config = { ...t.config, egressMode: "cilium", companySlug: "cilium-co", egressAllowCidrs: ["198.51.100.0/24"] };
    const a = await acquire(hooks, config, grant(["pypi.org"], ["203.0.113.7/32"]));
    const tenant = (await t.custom.getNamespacedCustomObject({
      group: "cilium.io",
      version: "v2",
      namespace: "paperclip-cilium-co",
      plural: "ciliumnetworkpolicies",
      name: "paperclip-egress-fqdn",
    })) as { spec: unknown };
    expect(tenant.spec).toEqual({
      endpointSelector: {},
      egress: [
        {
          toEndpoints: [{ matchLabels: { "k8s:io.kubernetes.pod.namespace": "kube-system", "k8s-app": "kube-dns" } }],
          toPorts: [{ ports: [{ port: "53", protocol: "ANY" }], rules: { dns: [{ matchPattern: "*" }] } }],
        },
        { toEndpoints: [{ matchLabels: { "k8s:io.kubernetes.pod.namespace": "paperclip", "app.kubernetes.io/name": "paperclip" } }], toPorts: [{ ports: [{ port: "3100", protocol: "TCP" }] }] },
        { toCIDRSet: [{ cidr: "198.51.100.0/24" }] },
      ],
    });
    await expect(t.net.readNamespacedNetworkPolicy({ namespace: "paperclip-cilium-co", name: "paperclip-egress-allow" })).rejects.toMatchObject({ code: 404 });
    const run = (await t.custom.getNamespacedCustomObject({ group: "cilium.io", version: "v2", namespace: "paperclip-cilium-co", plural: "ciliumnetworkpolicies", name: `${a.name}-egress` })) as {
      spec: unknown;
      metadata: { ownerReferences: Array<{ kind: string }> };
    };
    expect(run.metadata.ownerReferences[0]?.kind).toBe("Sandbox");
    expect(run.spec).toEqual({
      endpointSelector: { matchLabels: { "paperclip.io/workload": a.name } },
      egress: [
        { toFQDNs: [{ matchName: "pypi.org" }, { matchName: "api.anthropic.com" }], toPorts: [{ ports: [{ port: "443", protocol: "TCP" }] }] },
        { toCIDRSet: [{ cidr: "198.51.100.0/24" }, { cidr: "203.0.113.7/32" }] },
      ],
    });
    await a.release();
    await expect(
      t.custom.getNamespacedCustomObject({ group: "cilium.io", version: "v2", namespace: "paperclip-cilium-co", plural: "ciliumnetworkpolicies", name: `${a.name}-egress` }),
    ).rejects.toMatchObject({ code: 404 });
  });
});

describe("agent-sandbox version discovery", () => {
  it("uses v1alpha1 when the cluster serves only that, and v1beta1 when both are served", async () => {
    const alpha = await startTestCluster({ sandboxVersions: ["v1alpha1"] });
    try {
      const { hooks } = await startPlugin();
      const a = await acquire(hooks, alpha.config);
      expect(a.lease.metadata).toMatchObject({ apiVersion: "agents.x-k8s.io/v1alpha1", backend: "sandbox-cr", kind: "Sandbox" });
      expect((await a.exec("echo", ["ok"])).stdout).toBe("ok\n");
      await a.release();
    } finally {
      await alpha.close();
    }
    const { hooks } = await startPlugin();
    const b = await acquire(hooks, t.config);
    expect(b.lease.metadata).toMatchObject({ apiVersion: "agents.x-k8s.io/v1beta1" });
    await b.release();
  });

  it("a cluster without agent-sandbox: a clear error naming the fix", async () => {
    const none = await startTestCluster({ sandboxVersions: [] });
    try {
      const { hooks } = await startPlugin();
      await expect(acquire(hooks, none.config)).rejects.toThrow(/does not serve agents\.x-k8s\.io Sandbox \(v1beta1 or v1alpha1\): install the agent-sandbox controller, or use backend job/);
    } finally {
      await none.close();
    }
  });
});

export { scope };
