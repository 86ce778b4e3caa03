// Task-scoped egress: one policy per run, selecting only that run's pod and owned by its workload
// (so it goes with it). Standard NetworkPolicies cannot name hosts: host names alone open public
// IPv4 on TCP 80/443 minus the private and special ranges; with IP ranges only those are opened.
import type { EgressGrant } from "@paperclip-sandbox/kit";
import { shortenName } from "./names.js";

/** Never reachable through a host-name grant in standard mode. */
export const NON_PUBLIC_IPV4 = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4"];

export const WORKLOAD_LABEL = "paperclip.io/workload";

export interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

export const egressPolicyName = (workload: string) => shortenName(`${workload}-egress`);

function ownerReference(owner: OwnerRef) {
  return { apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: true };
}

/** The standard-mode rules for a grant (empty when it grants nothing). */
export function standardEgressRules(grant: EgressGrant): Array<Record<string, unknown>> {
  if (grant.allowCidrs.length > 0) return [{ to: grant.allowCidrs.map((cidr) => ({ ipBlock: { cidr } })) }];
  if (grant.allowFqdns.length > 0) {
    return [
      {
        to: [{ ipBlock: { cidr: "0.0.0.0/0", except: NON_PUBLIC_IPV4 } }],
        ports: [
          { protocol: "TCP", port: 80 },
          { protocol: "TCP", port: 443 },
        ],
      },
    ];
  }
  return [];
}

export function runNetworkPolicy(namespace: string, workload: string, labels: Record<string, string>, owner: OwnerRef, grant: EgressGrant) {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: egressPolicyName(workload), namespace, labels, ownerReferences: [ownerReference(owner)] },
    spec: { podSelector: { matchLabels: { [WORKLOAD_LABEL]: workload } }, policyTypes: ["Egress"], egress: standardEgressRules(grant) },
  };
}

export function runCiliumPolicy(namespace: string, workload: string, labels: Record<string, string>, owner: OwnerRef, grant: EgressGrant) {
  const egress: Array<Record<string, unknown>> = [];
  if (grant.allowFqdns.length > 0) egress.push({ toFQDNs: grant.allowFqdns.map((matchName) => ({ matchName })), toPorts: [{ ports: [{ port: "443", protocol: "TCP" }] }] });
  if (grant.allowCidrs.length > 0) egress.push({ toCIDRSet: grant.allowCidrs.map((cidr) => ({ cidr })) });
  return {
    apiVersion: "cilium.io/v2",
    kind: "CiliumNetworkPolicy",
    metadata: { name: egressPolicyName(workload), namespace, labels, ownerReferences: [ownerReference(owner)] },
    spec: { endpointSelector: { matchLabels: { [WORKLOAD_LABEL]: workload } }, egress },
  };
}
