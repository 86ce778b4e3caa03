import { describe, expect, it } from "vitest";
import { appendBlockedNetworkNote, cidrContains, egressEnv, fqdnMatches, isBlockedNetworkError, mergeEgressGrants, normalizeEgressGrant } from "./index.js";

describe("normalizeEgressGrant", () => {
  it("trims, lowercases FQDNs, drops trailing dots, blanks and duplicates; keeps CIDRs as written", () => {
    const grant = normalizeEgressGrant({
      networkEgress: {
        allowFqdns: [" API.Example.com. ", "api.example.com", "", "  ", 7, "*.npmjs.org"],
        allowCidrs: [" 10.0.0.0/8 ", "10.0.0.0/8", "2001:DB8::/32", ""],
      },
    });
    expect(grant).toEqual({ allowFqdns: ["api.example.com", "*.npmjs.org"], allowCidrs: ["10.0.0.0/8", "2001:DB8::/32"] });
  });

  it("yields an empty grant for missing or malformed settings", () => {
    const empty = { allowFqdns: [], allowCidrs: [] };
    for (const settings of [undefined, null, "x", [], {}, { networkEgress: null }, { networkEgress: { allowFqdns: "a.com" } }]) {
      expect(normalizeEgressGrant(settings)).toEqual(empty);
    }
  });

  it("merges grants without duplicates", () => {
    expect(mergeEgressGrants({ allowFqdns: ["a.com"], allowCidrs: ["1.0.0.0/8"] }, { allowFqdns: ["A.com.", "b.com"], allowCidrs: ["1.0.0.0/8"] })).toEqual({
      allowFqdns: ["a.com", "b.com"],
      allowCidrs: ["1.0.0.0/8"],
    });
  });
});

describe("matching", () => {
  it("matches exact names and leading-wildcard subdomains only", () => {
    expect(fqdnMatches("api.example.com", "API.example.com.")).toBe(true);
    expect(fqdnMatches("api.example.com", "x.api.example.com")).toBe(false);
    expect(fqdnMatches("*.example.com", "a.b.example.com")).toBe(true);
    expect(fqdnMatches("*.example.com", "example.com")).toBe(false);
    expect(fqdnMatches("*.example.com", "badexample.com")).toBe(false);
  });

  it("checks IPv4 and IPv6 CIDRs", () => {
    expect(cidrContains("10.0.0.0/8", "10.200.3.4")).toBe(true);
    expect(cidrContains("10.0.0.0/8", "11.0.0.1")).toBe(false);
    expect(cidrContains("192.168.1.7", "192.168.1.7")).toBe(true);
    expect(cidrContains("2001:db8::/32", "2001:db8:ffff::1")).toBe(true);
    expect(cidrContains("2001:db8::/32", "2001:db9::1")).toBe(false);
    expect(cidrContains("10.0.0.0/8", "::1")).toBe(false);
    expect(cidrContains("10.0.0.0/33", "10.0.0.1")).toBe(false);
    expect(cidrContains("nonsense", "10.0.0.1")).toBe(false);
  });
});

describe("blocked-network note", () => {
  it("recognises the usual denied-call messages, case-insensitively", () => {
    for (const line of [
      "curl: (6) Could not resolve host: example.com",
      "connect: Network is unreachable",
      "Connection timed out",
      "curl: (7) Failed to connect to x port 443",
      "Temporary failure in name resolution",
    ]) {
      expect(isBlockedNetworkError(line), line).toBe(true);
    }
    expect(isBlockedNetworkError("permission denied")).toBe(false);
  });

  it("recognises an egress proxy refusing the destination (curl and node)", () => {
    for (const line of [
      "curl: (56) CONNECT tunnel failed, response 403",
      "curl: (56) Received HTTP code 403 from proxy after CONNECT",
      "Error: tunneling socket could not be established, statusCode=403",
      "RequestAbortedError [AbortError]: Proxy response (403) !== 200 when HTTP Tunneling",
    ]) {
      expect(isBlockedNetworkError(line), line).toBe(true);
    }
    expect(isBlockedNetworkError("HTTP/1.1 403 Forbidden")).toBe(false);
    expect(isBlockedNetworkError("curl: (22) The requested URL returned error: 403")).toBe(false);
    const noted = appendBlockedNetworkNote("curl: (56) CONNECT tunnel failed, response 403\n", { allowFqdns: ["a.com"], allowCidrs: [] });
    expect(noted).toMatch(/\n\[paperclip\] this looks like a blocked network call.*allowFqdns=\[a\.com\]/);
  });

  it("states a provider-known cause instead of guessing, even when stderr does not match", () => {
    const grant = { allowFqdns: [], allowCidrs: ["10.0.0.0/8"] };
    const noted = appendBlockedNetworkNote("exit 1", grant, { cause: "the sandbox egress proxy refused 1 connection(s), last x.test:443: not granted\nsecond line" });
    expect(noted).toBe(
      "exit 1\n[paperclip] the sandbox egress proxy refused 1 connection(s), last x.test:443: not granted second line; grant access in executionWorkspaceSettings.networkEgress (current grant: allowFqdns=[] allowCidrs=[10.0.0.0/8]).\n",
    );
    expect(appendBlockedNetworkNote("exit 1\n", grant, { cause: "" })).toBe("exit 1\n");
  });

  it("appends one line naming the grant path and the grant", () => {
    const stderr = "curl: (6) Could not resolve host: example.com";
    const noted = appendBlockedNetworkNote(stderr, { allowFqdns: ["a.com"], allowCidrs: [] });
    expect(noted.startsWith(`${stderr}\n`)).toBe(true);
    const added = noted.slice(stderr.length + 1).trimEnd();
    expect(added.split("\n")).toHaveLength(1);
    expect(added).toContain("executionWorkspaceSettings.networkEgress");
    expect(added).toContain("allowFqdns=[a.com]");
    expect(appendBlockedNetworkNote(stderr, { allowFqdns: [], allowCidrs: [] })).toContain("no grant is set");
  });

  it("leaves unrelated stderr untouched", () => {
    expect(appendBlockedNetworkNote("exit 1\n", { allowFqdns: [], allowCidrs: [] })).toBe("exit 1\n");
  });
});

describe("egressEnv", () => {
  it("exposes the policy and comma lists", () => {
    expect(egressEnv({ allowFqdns: ["a.com", "b.com"], allowCidrs: ["10.0.0.0/8"] }, "deny-by-default")).toEqual({
      PAPERCLIP_NETWORK_EGRESS_POLICY: "deny-by-default",
      PAPERCLIP_NETWORK_EGRESS_ALLOW_FQDNS: "a.com,b.com",
      PAPERCLIP_NETWORK_EGRESS_ALLOW_CIDRS: "10.0.0.0/8",
    });
  });
});
