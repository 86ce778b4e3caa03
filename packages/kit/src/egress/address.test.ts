import { describe, expect, it } from "vitest";
import { cachedHostAddresses, canonicalIpText, cidrAdmits, cidrContains, describeHostLocal, embeddedIpv4, formatCidr, formatIp, hostLocalRanges, parseCidr, parseIp } from "./index.js";

const ranges = (ip: string, own: string[] = []) => hostLocalRanges(parseIp(ip)!, own).map((r) => `${r.cidr} ${describeHostLocal(r)}`);

describe("address normalization", () => {
  it("reduces every IPv4-mapped spelling to the IPv4 address", () => {
    for (const spelling of ["::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:ffff:7f00:0001", "[::FFFF:127.0.0.1]", " ::ffff:127.0.0.1 "]) {
      expect(canonicalIpText(spelling), spelling).toBe("127.0.0.1");
    }
    expect(canonicalIpText("::ffff:0.0.0.0")).toBe("0.0.0.0");
  });

  it("writes IPv6 in RFC 5952 form and keeps embedded (non-mapped) forms IPv6", () => {
    expect(canonicalIpText("0:0:0:0:0:0:0:1")).toBe("::1");
    expect(canonicalIpText("2001:DB8:0:0:1:0:0:1")).toBe("2001:db8::1:0:0:1");
    expect(canonicalIpText("64:ff9b::127.0.0.1")).toBe("64:ff9b::7f00:1");
    expect(canonicalIpText("::127.0.0.1")).toBe("::7f00:1");
    expect(canonicalIpText("1:2:3:4:5:6:7:8")).toBe("1:2:3:4:5:6:7:8");
    expect(canonicalIpText("::")).toBe("::");
  });

  it("refuses zone indexes and non-standard IPv4 spellings", () => {
    for (const text of ["fe80::1%eth0", "127.1", "0x7f.0.0.1", "2130706433", "01.2.3.4", "[127.0.0.1", "example.com", ""]) {
      expect(parseIp(text), text).toBeNull();
    }
  });

  it("finds the IPv4 address carried by IPv4-compatible, NAT64, IPv4-translated and 6to4 addresses", () => {
    const carried = (ip: string) => {
      const found = embeddedIpv4(parseIp(ip)!);
      return found ? `${found.form} ${formatIp(found.ipv4)}` : null;
    };
    expect(carried("::127.0.0.1")).toBe("IPv4-compatible 127.0.0.1");
    expect(carried("64:ff9b::7f00:1")).toBe("NAT64 127.0.0.1");
    expect(carried("::ffff:0:a9fe:a9fe")).toBe("IPv4-translated 169.254.169.254");
    expect(carried("2002:7f00:1::1")).toBe("6to4 127.0.0.1");
    expect(carried("::1")).toBeNull();
    expect(carried("::")).toBeNull();
    expect(carried("2001:db8::1")).toBeNull();
    expect(carried("10.0.0.1")).toBeNull();
  });

  it("parses CIDRs with host bits cleared, IPv4-mapped CIDRs as IPv4, and refuses malformed ones", () => {
    expect(formatCidr(parseCidr("10.1.2.3/8")!)).toBe("10.0.0.0/8");
    expect(formatCidr(parseCidr("::ffff:127.0.0.0/104")!)).toBe("127.0.0.0/8");
    expect(formatCidr(parseCidr("::ffff:0:0/96")!)).toBe("0.0.0.0/0");
    expect(formatCidr(parseCidr("192.168.1.7")!)).toBe("192.168.1.7/32");
    expect(formatCidr(parseCidr("::/0")!)).toBe("::/0");
    for (const text of ["10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/8/8", "nonsense", "[::1]/128", "10.0.0.0/ 8"]) {
      expect(parseCidr(text), text).toBeNull();
    }
  });

  it("compares canonical forms: IPv4 CIDRs contain IPv4-mapped addresses, ::/0 contains no IPv4 address", () => {
    expect(cidrContains("10.0.0.0/8", "::ffff:10.1.2.3")).toBe(true);
    expect(cidrContains("::ffff:10.0.0.0/104", "10.1.2.3")).toBe(true);
    expect(cidrContains("::/0", "::ffff:127.0.0.1")).toBe(false);
    expect(cidrContains("::/0", "2001:db8::1")).toBe(true);
    expect(cidrContains("0.0.0.0/0", "::1")).toBe(false);
  });
});

describe("host-local addresses", () => {
  it("names the host-local range of loopback, unspecified, link-local, multicast and broadcast addresses", () => {
    expect(ranges("127.0.0.1")).toEqual(["127.0.0.0/8 loopback"]);
    expect(ranges("::ffff:7f00:1")).toEqual(["127.0.0.0/8 loopback"]);
    expect(ranges("0.0.0.0")).toEqual(["0.0.0.0/8 unspecified"]);
    expect(ranges("169.254.169.254")).toEqual(["169.254.0.0/16 link-local"]);
    expect(ranges("239.1.2.3")).toEqual(["224.0.0.0/4 multicast"]);
    expect(ranges("255.255.255.255")).toEqual(["255.255.255.255/32 broadcast"]);
    expect(ranges("::1")).toEqual(["::1/128 loopback"]);
    expect(ranges("::")).toEqual(["::/128 unspecified"]);
    expect(ranges("fe80::1")).toEqual(["fe80::/10 link-local"]);
    expect(ranges("ff02::1")).toEqual(["ff00::/8 multicast"]);
    expect(ranges("8.8.8.8")).toEqual([]);
    expect(ranges("10.0.0.1")).toEqual([]);
    expect(ranges("2001:db8::1")).toEqual([]);
  });

  it("judges embedded forms by the IPv4 address they carry, with the range in their own spelling", () => {
    expect(ranges("64:ff9b::7f00:1")).toEqual(["64:ff9b::7f00:0/104 loopback (the IPv4 address it embeds, NAT64)"]);
    expect(ranges("::127.0.0.1")).toEqual(["::7f00:0/104 loopback (the IPv4 address it embeds, IPv4-compatible)"]);
    expect(ranges("2002:a9fe:a9fe::")).toEqual(["2002:a9fe::/32 link-local (the IPv4 address it embeds, 6to4)"]);
    expect(ranges("64:ff9b::808:808")).toEqual([]);
  });

  it("counts the host's own interface addresses, in any spelling, except those already loopback or link-local", () => {
    const own = ["127.0.0.1", "::1", "192.0.2.2", "fd00::2", "fe80::fc:ff:fe00:1"];
    expect(ranges("192.0.2.2", own)).toEqual(["192.0.2.2/32 the worker host's own address"]);
    expect(ranges("::ffff:c000:202", own)).toEqual(["192.0.2.2/32 the worker host's own address"]);
    expect(ranges("64:ff9b::192.0.2.2", own)).toEqual(["64:ff9b::c000:202/128 the worker host's own address (the IPv4 address it embeds, NAT64)"]);
    expect(ranges("fd00:0::2", own)).toEqual(["fd00::2/128 the worker host's own address"]);
    expect(ranges("127.0.0.1", own)).toEqual(["127.0.0.0/8 loopback"]);
    expect(ranges("192.0.2.3", own)).toEqual([]);
  });
});

describe("cidrAdmits", () => {
  const own = ["192.0.2.2", "fd00::2"];

  it("admits ordinary addresses by containment, in any spelling", () => {
    expect(cidrAdmits("10.0.0.0/8", "10.1.2.3", own)).toBe(true);
    expect(cidrAdmits("10.0.0.0/8", "::ffff:10.1.2.3", own)).toBe(true);
    expect(cidrAdmits("0.0.0.0/0", "8.8.8.8", own)).toBe(true);
    expect(cidrAdmits("::/0", "2001:db8::1", own)).toBe(true);
    expect(cidrAdmits("10.0.0.0/8", "11.0.0.1", own)).toBe(false);
    expect(cidrAdmits("nonsense", "10.0.0.1", own)).toBe(false);
  });

  it("admits a host-local address only through a CIDR inside its host-local range", () => {
    for (const cidr of ["0.0.0.0/0", "::/0", "0.0.0.0/1", "::ffff:0:0/96", "64.0.0.0/2"]) {
      expect(cidrAdmits(cidr, "127.0.0.1", own), cidr).toBe(false);
      expect(cidrAdmits(cidr, "::ffff:127.0.0.1", own), cidr).toBe(false);
    }
    expect(cidrAdmits("::/0", "::1", own)).toBe(false);
    expect(cidrAdmits("::/0", "fe80::1", own)).toBe(false);
    expect(cidrAdmits("::/0", "64:ff9b::7f00:1", own)).toBe(false);
    expect(cidrAdmits("64:ff9b::/96", "64:ff9b::7f00:1", own)).toBe(false);
    expect(cidrAdmits("0.0.0.0/0", "169.254.169.254", own)).toBe(false);
    expect(cidrAdmits("224.0.0.0/3", "239.1.1.1", own)).toBe(false);
    for (const cidr of ["127.0.0.0/8", "127.0.0.1/32", "127.0.0.1", "::ffff:127.0.0.0/104"]) {
      expect(cidrAdmits(cidr, "127.0.0.1", own), cidr).toBe(true);
    }
    expect(cidrAdmits("::1/128", "::1", own)).toBe(true);
    expect(cidrAdmits("169.254.169.254/32", "169.254.169.254", own)).toBe(true);
    expect(cidrAdmits("64:ff9b::7f00:0/104", "64:ff9b::7f00:1", own)).toBe(true);
    expect(cidrAdmits("64:ff9b::808:808/128", "64:ff9b::808:808", own)).toBe(true);
  });

  it("admits the host's own address only through a CIDR naming that one address", () => {
    expect(cidrAdmits("192.0.2.0/24", "192.0.2.2", own)).toBe(false);
    expect(cidrAdmits("0.0.0.0/0", "192.0.2.2", own)).toBe(false);
    expect(cidrAdmits("192.0.2.0/24", "192.0.2.3", own)).toBe(true);
    expect(cidrAdmits("192.0.2.2/32", "192.0.2.2", own)).toBe(true);
    expect(cidrAdmits("192.0.2.2/32", "::ffff:192.0.2.2", own)).toBe(true);
    expect(cidrAdmits("fd00::/64", "fd00::2", own)).toBe(false);
    expect(cidrAdmits("fd00::2/128", "fd00::2", own)).toBe(true);
  });
});

describe("cachedHostAddresses", () => {
  it("reads at most once per period", () => {
    let reads = 0;
    const source = cachedHostAddresses(60_000, () => [`10.0.0.${++reads}`]);
    expect(source()).toEqual(["10.0.0.1"]);
    expect(source()).toEqual(["10.0.0.1"]);
    expect(reads).toBe(1);
    const uncached = cachedHostAddresses(0, () => [`10.0.0.${++reads}`]);
    expect(uncached()).toEqual(["10.0.0.2"]);
    expect(uncached()).toEqual(["10.0.0.3"]);
  });
});
