import { X509Certificate, generateKeyPairSync, randomBytes, sign } from "node:crypto";
import net from "node:net";

/** A throwaway certificate for an emulator that an SDK only reaches over https. */
export interface SelfSignedCertificate {
  readonly certPem: string;
  readonly keyPem: string;
  /** SHA-256 fingerprint, as `openssl x509 -fingerprint -sha256` prints it. */
  readonly fingerprint256: string;
}

export interface SelfSignedOptions {
  /** DNS names and IP addresses for subjectAltName (default localhost, 127.0.0.1, ::1). */
  hosts?: string[];
  /** Validity in days from an hour ago (default 7). */
  days?: number;
  commonName?: string;
}

/**
 * Makes an ECDSA P-256 self-signed certificate with node:crypto alone (no openssl binary): the
 * DER is assembled here and signed with the fresh key. Clients trust it by passing `certPem` as
 * their CA (`ca:` option, or NODE_EXTRA_CA_CERTS for an SDK that takes no options).
 */
export function generateSelfSignedCertificate(options: SelfSignedOptions = {}): SelfSignedCertificate {
  const hosts = options.hosts ?? ["localhost", "127.0.0.1", "::1"];
  const days = options.days ?? 7;
  if (hosts.length === 0) throw new TypeError("selfSigned hosts: must name at least one DNS name or IP address");
  if (!(Number.isInteger(days) && days >= 1)) throw new TypeError(`selfSigned days: must be an integer >= 1 (got ${days})`);

  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const spki = publicKey.export({ type: "spki", format: "der" });
  const name = sequence(set(sequence(oid("2.5.4.3"), tlv(0x0c, Buffer.from(options.commonName ?? "paperclip-sandbox emulator", "utf8")))));
  const notBefore = new Date(Date.now() - 3_600_000);
  const notAfter = new Date(notBefore.getTime() + days * 86_400_000);
  const serial = randomBytes(16);
  // A positive INTEGER in minimal DER: first byte 0x01..0x7f (a leading 0x00 before a byte < 0x80
  // is "illegal padding" to OpenSSL, which a plain top-bit mask hit once in 256 certificates).
  serial[0] = 1 + ((serial[0] ?? 0) % 0x7f);
  const ecdsaWithSha256 = sequence(oid("1.2.840.10045.4.3.2"));

  const altNames = hosts.map((host) => {
    const family = net.isIP(host);
    if (family === 4) return tlv(0x87, Buffer.from(host.split(".").map(Number)));
    if (family === 6) return tlv(0x87, ipv6Bytes(host));
    return tlv(0x82, Buffer.from(host, "ascii"));
  });
  const extensions = sequence(
    sequence(oid("2.5.29.17"), tlv(0x04, sequence(...altNames))),
    // CA:TRUE (critical), as `openssl req -x509` makes it, so the certificate is its own trust anchor.
    sequence(oid("2.5.29.19"), tlv(0x01, Buffer.from([0xff])), tlv(0x04, sequence(tlv(0x01, Buffer.from([0xff]))))),
  );

  const tbs = sequence(tlv(0xa0, tlv(0x02, Buffer.from([2]))), tlv(0x02, serial), ecdsaWithSha256, name, sequence(utcTime(notBefore), utcTime(notAfter)), name, spki, tlv(0xa3, extensions));
  const signature = sign("sha256", tbs, privateKey); // DER ECDSA-Sig-Value, as X.509 wants
  const der = sequence(tbs, ecdsaWithSha256, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));

  const certPem = `-----BEGIN CERTIFICATE-----\n${der.toString("base64").replace(/.{1,64}/g, "$&\n")}-----END CERTIFICATE-----\n`;
  const keyPem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  return { certPem, keyPem, fingerprint256: new X509Certificate(certPem).fingerprint256 };
}

function tlv(tag: number, content: Buffer): Buffer {
  const length = content.length;
  let header: Buffer;
  if (length < 0x80) header = Buffer.from([tag, length]);
  else {
    const bytes: number[] = [];
    for (let rest = length; rest > 0; rest >>= 8) bytes.unshift(rest & 0xff);
    header = Buffer.from([tag, 0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([header, content]);
}

const sequence = (...items: Buffer[]) => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]) => tlv(0x31, Buffer.concat(items));

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split(".").map(Number);
  const bytes = [first * 40 + second];
  for (const arc of rest) {
    const chunk = [arc & 0x7f];
    for (let value = arc >> 7; value > 0; value >>= 7) chunk.unshift(0x80 | (value & 0x7f));
    bytes.push(...chunk);
  }
  return tlv(0x06, Buffer.from(bytes));
}

function utcTime(date: Date): Buffer {
  const two = (n: number) => String(n).padStart(2, "0");
  const text = two(date.getUTCFullYear() % 100) + two(date.getUTCMonth() + 1) + two(date.getUTCDate()) + two(date.getUTCHours()) + two(date.getUTCMinutes()) + two(date.getUTCSeconds()) + "Z";
  return tlv(0x17, Buffer.from(text, "ascii"));
}

function ipv6Bytes(address: string): Buffer {
  const [head = "", tail = ""] = address.split("::");
  const groups = (part: string) => (part === "" ? [] : part.split(":"));
  const headGroups = groups(head);
  const tailGroups = address.includes("::") ? groups(tail) : [];
  const missing = 8 - headGroups.length - tailGroups.length;
  const all = [...headGroups, ...Array<string>(missing).fill("0"), ...tailGroups];
  const out = Buffer.alloc(16);
  all.forEach((group, index) => out.writeUInt16BE(parseInt(group, 16), index * 2));
  return out;
}
