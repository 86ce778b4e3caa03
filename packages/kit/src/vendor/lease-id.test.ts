import { describe, expect, it } from "vitest";
import { defineLeaseIdCodec, LeaseIdError, opaqueLeaseIdCodec } from "./index.js";

const DNS_LABEL = "[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?";
const kubernetes = defineLeaseIdCodec<{ namespace: string; name: string }>({
  vendor: "kubernetes",
  prefix: "k8s-",
  pattern: new RegExp(`(${DNS_LABEL})/(${DNS_LABEL})`),
  rule: "<namespace>/<pod name>, each a DNS label (lowercase a-z 0-9 -, at most 63)",
  encode: ({ namespace, name }) => `${namespace}/${name}`,
  decode: (_body, match) => ({ namespace: match[1]!, name: match[2]! }),
});

// modal.md §3: /^sb-[0-9A-Za-z]{22}$/ is a V1 sandbox; any other id is V2.
const modal = defineLeaseIdCodec<{ version: 1 | 2; sandboxId: string }>({
  vendor: "modal",
  pattern: /sb-[0-9A-Za-z][0-9A-Za-z-]{1,62}/,
  rule: "a Modal sandbox id (sb- then letters, digits and -)",
  encode: ({ sandboxId }) => sandboxId,
  decode: (body) => ({ version: /^sb-[0-9A-Za-z]{22}$/.test(body) ? 1 : 2, sandboxId: body }),
});

function refusal(fn: () => unknown): LeaseIdError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(LeaseIdError);
    return error as LeaseIdError;
  }
  throw new Error("expected a refusal");
}

describe("lease id codecs", () => {
  it("round-trips a Kubernetes namespace/name", () => {
    const id = kubernetes.encode({ namespace: "paperclip-c1", name: "run-42" });
    expect(id).toBe("k8s-paperclip-c1/run-42");
    expect(kubernetes.decode(id)).toEqual({ namespace: "paperclip-c1", name: "run-42" });
  });

  it("tells Modal V1 from V2 ids by shape", () => {
    expect(modal.decode(modal.encode({ version: 1, sandboxId: "sb-ABCDEFGHIJKLMNOPQRSTUV" }))).toEqual({ version: 1, sandboxId: "sb-ABCDEFGHIJKLMNOPQRSTUV" });
    expect(modal.decode("sb-v2-abc")).toEqual({ version: 2, sandboxId: "sb-v2-abc" });
  });

  it("round-trips an opaque vendor id, with or without a prefix", () => {
    const daytona = opaqueLeaseIdCodec({ vendor: "daytona" });
    expect(daytona.decode(daytona.encode("0b6f3c1e-7a2d-4f6b-9c1e-2a3b4c5d6e7f"))).toBe("0b6f3c1e-7a2d-4f6b-9c1e-2a3b4c5d6e7f");
    const e2b = opaqueLeaseIdCodec({ vendor: "e2b", prefix: "e2b-" });
    expect(e2b.encode("i1a2b3c4")).toBe("e2b-i1a2b3c4");
    expect(e2b.decode("e2b-i1a2b3c4")).toBe("i1a2b3c4");
  });

  it("refuses a malformed id from the host, naming the rule", () => {
    const wrongShape = refusal(() => kubernetes.decode("k8s-default/../kube-system/x"));
    expect(wrongShape.message).toBe(
      'kubernetes providerLeaseId: "k8s-default/../kube-system/x" does not follow the rule; expected "k8s-" followed by <namespace>/<pod name>, each a DNS label (lowercase a-z 0-9 -, at most 63)',
    );
    expect(wrongShape).toMatchObject({ code: "invalid_lease_id", field: "providerLeaseId" });
    expect(refusal(() => kubernetes.decode("default/pod")).message).toContain('does not start with "k8s-"');
    expect(refusal(() => kubernetes.decode("k8s-Default/pod")).message).toContain("does not follow the rule");
    expect(refusal(() => kubernetes.decode(`k8s-ns/${"a".repeat(64)}`)).message).toContain("does not follow the rule");
    expect(refusal(() => kubernetes.decode(null)).message).toContain("expected a string, got null");
    expect(refusal(() => kubernetes.decode("")).message).toContain("empty");
    expect(refusal(() => kubernetes.decode("k8s-a/b\n")).message).toContain("control characters");
    expect(refusal(() => kubernetes.decode("k8s-" + "a".repeat(300))).message).toContain("longer than 256");
    const daytona = opaqueLeaseIdCodec({ vendor: "daytona" });
    for (const bad of ["../sandbox", "a/b", "id?x=1", "id#frag", "a b", "%2e%2e"]) expect(daytona.is(bad), bad).toBe(false);
  });

  it("an unanchored pattern still matches whole ids only, and a global flag does not make it stateful", () => {
    const codec = opaqueLeaseIdCodec({ vendor: "x", pattern: /[a-z]+/g });
    expect(codec.is("abc")).toBe(true);
    expect(codec.is("abc")).toBe(true);
    expect(codec.is("abc/def")).toBe(false);
  });

  it("tryDecode answers undefined for an id that is not ours, instead of throwing", () => {
    expect(kubernetes.tryDecode("k8s-ns/pod-1")).toEqual({ namespace: "ns", name: "pod-1" });
    for (const bad of [undefined, 42, "", "ns/pod-1", "k8s-../x", "k8s-a/b\n"]) expect(kubernetes.tryDecode(bad)).toBeUndefined();
  });

  it("refuses to make a lease id from a vendor id it could not read back", () => {
    const error = refusal(() => kubernetes.encode({ namespace: "ns", name: "Has_Upper" }));
    expect(error.message).toMatch(/^kubernetes returned an id that cannot be a providerLeaseId/);
  });
});
