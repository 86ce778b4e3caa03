/**
 * IP addresses and CIDRs for egress decisions, with every spelling of one destination reduced to
 * one form first, so that no check can be passed by writing an address differently:
 * - an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, `::ffff:7f00:1`) *is* the IPv4 address (a
 *   dual-stack socket connecting to it reaches 127.0.0.1), and becomes it; a CIDR inside
 *   `::ffff:0:0/96` becomes the IPv4 CIDR it covers;
 * - IPv6 addresses that carry an IPv4 address for a translator or tunnel (IPv4-compatible `::a.b.c.d`,
 *   NAT64 `64:ff9b::/96`, IPv4-translated `::ffff:0:a.b.c.d`, 6to4 `2002::/16`) stay IPv6, but are
 *   host-local when the address they carry is.
 *
 * Host-local addresses are the worker host's own: loopback, unspecified, link-local, multicast,
 * broadcast, and the host's own interface addresses. A CIDR admits one only when the CIDR lies
 * wholly inside every host-local range the address is in (e.g. `127.0.0.0/8` or `127.0.0.1/32` for
 * 127.0.0.1; exactly `192.0.2.2/32` for the host's own 192.0.2.2), so `0.0.0.0/0`, `::/0` or
 * `10.0.0.0/8` never reach the host by accident.
 */
import { isIP } from "node:net";
import os from "node:os";

export interface IpAddress {
  readonly family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  readonly bytes: Uint8Array;
}

export interface IpCidr {
  readonly family: 4 | 6;
  /** The network address, host bits cleared. */
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

export type EmbeddingForm = "IPv4-compatible" | "NAT64" | "IPv4-translated" | "6to4";

export type HostLocalKind = "loopback" | "unspecified" | "link-local" | "multicast" | "broadcast" | "own-address";

export interface HostLocalRange {
  /** The range, as a CIDR: what a grant must lie inside to admit the address. */
  readonly cidr: string;
  readonly kind: HostLocalKind;
  /** Set when the address is host-local through the IPv4 address it embeds. */
  readonly via?: EmbeddingForm;
}

/** Parses an IPv4 or IPv6 literal (brackets allowed). Zone indexes (`%eth0`) and non-standard IPv4 spellings (`127.1`, `0x7f.0.0.1`) are not addresses. */
export function parseIp(text: string): IpAddress | null {
  const trimmed = text.trim();
  const literal = trimmed.startsWith("[") && trimmed.endsWith("]") ? trimmed.slice(1, -1) : trimmed;
  if (literal.includes("%")) return null;
  const family = isIP(literal);
  if (family === 4) return { family: 4, bytes: Uint8Array.from(literal.split(".").map(Number)) };
  if (family === 6) return { family: 6, bytes: ipv6Bytes(literal) };
  return null;
}

/** The address as it reaches the network: IPv4-mapped IPv6 becomes IPv4; anything else is itself. */
export function canonicalIp(address: IpAddress): IpAddress {
  if (address.family === 6 && isMapped(address.bytes)) return { family: 4, bytes: address.bytes.slice(12) };
  return address;
}

/** `parseIp` then `canonicalIp`, as text (`::ffff:7f00:1` → `127.0.0.1`, `::0:1` → `::1`); null when not an address. */
export function canonicalIpText(text: string): string | null {
  const parsed = parseIp(text);
  return parsed ? formatIp(canonicalIp(parsed)) : null;
}

export function formatIp(address: IpAddress): string {
  if (address.family === 4) return [...address.bytes].join(".");
  const groups = Array.from({ length: 8 }, (_, i) => (address.bytes[2 * i]! << 8) | address.bytes[2 * i + 1]!);
  // RFC 5952: compress the longest run of two or more zero groups (the first, on a tie).
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i];
    i = j;
  }
  const hex = groups.map((group) => group.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

/**
 * Parses `network/prefix` (or a bare address: one address), clearing host bits. A CIDR inside
 * `::ffff:0:0/96` becomes the IPv4 CIDR it covers; a wider IPv6 CIDR (`::/0`) covers no IPv4 address.
 */
export function parseCidr(text: string): IpCidr | null {
  const [network, prefixText, ...rest] = text.trim().split("/");
  if (rest.length > 0 || network === undefined) return null;
  const address = parseIp(network);
  if (!address || network.trim().startsWith("[")) return null;
  const maxPrefix = address.family === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = prefixText === undefined ? maxPrefix : Number(prefixText);
  if (prefix > maxPrefix) return null;
  if (address.family === 6 && prefix >= 96 && isMapped(address.bytes)) return masked(4, address.bytes.slice(12), prefix - 96);
  return masked(address.family, address.bytes, prefix);
}

export function formatCidr(cidr: IpCidr): string {
  return `${formatIp(cidr)}/${cidr.prefix}`;
}

/** Whether `address` (canonical) is inside `cidr`; families never mix. */
export function cidrHas(cidr: IpCidr, address: IpAddress): boolean {
  return cidr.family === address.family && samePrefix(cidr.bytes, address.bytes, cidr.prefix);
}

/** Whether every address of `inner` is inside `outer`. */
export function cidrWithin(inner: IpCidr, outer: IpCidr): boolean {
  return inner.family === outer.family && inner.prefix >= outer.prefix && samePrefix(outer.bytes, inner.bytes, outer.prefix);
}

/** The IPv4 address an IPv6 address carries for a translator or tunnel, if it is one of those forms. */
export function embeddedIpv4(address: IpAddress): { form: EmbeddingForm; ipv4: IpAddress } | null {
  if (address.family !== 6) return null;
  for (const embedding of EMBEDDINGS) {
    if (!samePrefix(embedding.prefix.bytes, address.bytes, embedding.prefix.prefix)) continue;
    if (embedding.form === "IPv4-compatible" && isUnspecifiedOrLoopback6(address.bytes)) continue;
    const offset = embedding.prefix.prefix / 8;
    return { form: embedding.form, ipv4: { family: 4, bytes: address.bytes.slice(offset, offset + 4) } };
  }
  return null;
}

/**
 * The host-local ranges `address` is in (none: it is not host-local). `hostAddresses` are the worker
 * host's own interface addresses; those already loopback or link-local count as that.
 */
export function hostLocalRanges(address: IpAddress, hostAddresses: readonly string[] = []): HostLocalRange[] {
  const canonical = canonicalIp(address);
  const own = ownAddresses(hostAddresses);
  const found: HostLocalRange[] = [];
  const collect = (candidate: IpAddress, wrap: (range: IpCidr) => IpCidr, via?: EmbeddingForm) => {
    let special = false;
    for (const range of SPECIAL_RANGES) {
      if (!cidrHas(range.cidr, candidate)) continue;
      special = true;
      found.push({ cidr: formatCidr(wrap(range.cidr)), kind: range.kind, ...(via ? { via } : {}) });
    }
    if (!special && own.some((mine) => sameAddress(mine, candidate))) {
      const single = masked(candidate.family, candidate.bytes, candidate.family === 4 ? 32 : 128);
      found.push({ cidr: formatCidr(wrap(single)), kind: "own-address", ...(via ? { via } : {}) });
    }
  };
  collect(canonical, (range) => range);
  const embedded = embeddedIpv4(canonical);
  if (embedded) {
    const embedding = EMBEDDINGS.find((e) => e.form === embedded.form)!;
    collect(embedded.ipv4, (range) => embed(embedding.prefix, range), embedded.form);
  }
  return found;
}

/**
 * Whether the CIDR grant `cidr` admits `ip`: it contains the address and, when the address is
 * host-local, lies wholly inside every host-local range the address is in. Both are compared in
 * canonical form (IPv4-mapped spellings are IPv4). Malformed input never admits.
 */
export function cidrAdmits(cidr: string, ip: string, hostAddresses: readonly string[] = []): boolean {
  const range = parseCidr(cidr);
  const parsed = parseIp(ip);
  if (!range || !parsed) return false;
  const address = canonicalIp(parsed);
  if (!cidrHas(range, address)) return false;
  return hostLocalRanges(address, hostAddresses).every((local) => cidrWithin(range, parseCidr(local.cidr)!));
}

/** "loopback", "the worker host's own address", "loopback (the IPv4 address it embeds, NAT64)"... */
export function describeHostLocal(range: HostLocalRange): string {
  const what = range.kind === "own-address" ? "the worker host's own address" : range.kind;
  return range.via ? `${what} (the IPv4 address it embeds, ${range.via})` : what;
}

/** The worker host's interface addresses, every family, as the kernel lists them now. */
export function hostInterfaceAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flatMap((entries) => entries ?? [])
    .map((entry) => entry.address);
}

/** `read` (by default `hostInterfaceAddresses`) at most once per `ttlMs`: interfaces change rarely, decisions are frequent. */
export function cachedHostAddresses(ttlMs = 1_000, read: () => readonly string[] = hostInterfaceAddresses): () => readonly string[] {
  let value: readonly string[] = [];
  let readAt = -Infinity;
  return () => {
    const now = Date.now();
    if (now - readAt >= ttlMs) {
      value = read();
      readAt = now;
    }
    return value;
  };
}

const SPECIAL_RANGES: readonly { cidr: IpCidr; kind: Exclude<HostLocalKind, "own-address"> }[] = (
  [
    ["0.0.0.0/8", "unspecified"],
    ["127.0.0.0/8", "loopback"],
    ["169.254.0.0/16", "link-local"],
    ["224.0.0.0/4", "multicast"],
    ["255.255.255.255/32", "broadcast"],
    ["::/128", "unspecified"],
    ["::1/128", "loopback"],
    ["fe80::/10", "link-local"],
    ["ff00::/8", "multicast"],
  ] as const
).map(([cidr, kind]) => ({ cidr: parseCidr(cidr)!, kind }));

/** IPv6 prefixes directly followed by an embedded IPv4 address (the address starts at prefix/8). */
const EMBEDDINGS: readonly { form: EmbeddingForm; prefix: IpCidr }[] = (
  [
    ["IPv4-compatible", "::/96"],
    ["NAT64", "64:ff9b::/96"],
    ["IPv4-translated", "::ffff:0:0:0/96"],
    ["6to4", "2002::/16"],
  ] as const
).map(([form, cidr]) => ({ form, prefix: parseCidr(cidr)! }));

/** The IPv6 range of the addresses that embed an IPv4 `range` after `prefix`. */
function embed(prefix: IpCidr, range: IpCidr): IpCidr {
  const bytes = prefix.bytes.slice();
  bytes.set(range.bytes, prefix.prefix / 8);
  return masked(6, bytes, prefix.prefix + range.prefix);
}

function ownAddresses(hostAddresses: readonly string[]): IpAddress[] {
  const parsed: IpAddress[] = [];
  for (const text of hostAddresses) {
    const address = parseIp(text);
    if (address) parsed.push(canonicalIp(address));
  }
  return parsed;
}

function ipv6Bytes(literal: string): Uint8Array {
  let text = literal.toLowerCase();
  if (text.includes(".")) {
    // A trailing dotted quad is the last two groups.
    const cut = text.lastIndexOf(":") + 1;
    const quad = text.slice(cut).split(".").map(Number);
    text = `${text.slice(0, cut)}${((quad[0]! << 8) | quad[1]!).toString(16)}:${((quad[2]! << 8) | quad[3]!).toString(16)}`;
  }
  let groups: string[];
  const gap = text.indexOf("::");
  if (gap >= 0) {
    const head = text.slice(0, gap).split(":").filter(Boolean);
    const tail = text
      .slice(gap + 2)
      .split(":")
      .filter(Boolean);
    groups = [...head, ...Array<string>(8 - head.length - tail.length).fill("0"), ...tail];
  } else {
    groups = text.split(":");
  }
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    const value = parseInt(group, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 0xff;
  });
  return bytes;
}

function isMapped(bytes: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

function isUnspecifiedOrLoopback6(bytes: Uint8Array): boolean {
  for (let i = 0; i < 15; i++) if (bytes[i] !== 0) return false;
  return bytes[15]! <= 1;
}

function masked(family: 4 | 6, source: Uint8Array, prefix: number): IpCidr {
  const bytes = source.slice();
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - 8 * i));
    bytes[i] = bytes[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return { family, bytes, prefix };
}

function samePrefix(a: Uint8Array, b: Uint8Array, prefix: number): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length && 8 * i < prefix; i++) {
    const keep = Math.min(8, prefix - 8 * i);
    const mask = (0xff << (8 - keep)) & 0xff;
    if ((a[i]! & mask) !== (b[i]! & mask)) return false;
  }
  return true;
}

function sameAddress(a: IpAddress, b: IpAddress): boolean {
  return a.family === b.family && a.bytes.every((byte, i) => byte === b.bytes[i]);
}
