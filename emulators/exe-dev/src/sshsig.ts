import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from "node:crypto";

/**
 * The SSH signature format exe.dev tokens carry (OpenSSH PROTOCOL.sshsig), for Ed25519 keys: what
 * `ssh-keygen -Y sign -n v0@exe.dev` makes, parsed, verified and (for the emulator's own tokens)
 * made with node:crypto.
 */

const MAGIC = Buffer.from("SSHSIG");

/** An Ed25519 key as SSH sees it. */
export interface Ed25519Key {
  /** The SSH wire blob of the public key (`string "ssh-ed25519" || string pk`). */
  blob: Buffer;
  publicKey: KeyObject;
  privateKey?: KeyObject;
  /** `SHA256:<base64 without padding>`, as `ssh-keygen -l` prints it. */
  fingerprint: string;
  /** The authorized_keys line. */
  line: string;
}

class Reader {
  private offset = 0;
  constructor(private readonly buffer: Buffer) {}
  bytes(n: number): Buffer {
    if (this.offset + n > this.buffer.length) throw new Error("truncated");
    const out = this.buffer.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }
  uint32(): number {
    return this.bytes(4).readUInt32BE(0);
  }
  string(): Buffer {
    return this.bytes(this.uint32());
  }
  get done(): boolean {
    return this.offset === this.buffer.length;
  }
}

const sshString = (value: Buffer | string) => {
  const data = typeof value === "string" ? Buffer.from(value) : value;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length, 0);
  return Buffer.concat([length, data]);
};

function keyFromRaw(pk: Buffer, seed?: Buffer, comment = ""): Ed25519Key {
  const x = pk.toString("base64url");
  const blob = Buffer.concat([sshString("ssh-ed25519"), sshString(pk)]);
  return {
    blob,
    publicKey: createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x }, format: "jwk" }),
    privateKey: seed ? createPrivateKey({ key: { kty: "OKP", crv: "Ed25519", x, d: seed.toString("base64url") }, format: "jwk" }) : undefined,
    fingerprint: fingerprintOf(blob),
    line: `ssh-ed25519 ${blob.toString("base64")}${comment ? ` ${comment}` : ""}`,
  };
}

export function fingerprintOf(blob: Buffer): string {
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}

/** An `ssh-ed25519 AAAA… comment` line; other key types are refused. */
export function parsePublicKeyLine(line: string): Ed25519Key {
  const [type, data, ...comment] = line.trim().split(/\s+/);
  if (type !== "ssh-ed25519" || !data) throw new Error("only ssh-ed25519 public keys are supported by the emulator");
  return keyFromBlob(Buffer.from(data, "base64"), comment.join(" "));
}

function keyFromBlob(blob: Buffer, comment = ""): Ed25519Key {
  const reader = new Reader(blob);
  if (reader.string().toString() !== "ssh-ed25519") throw new Error("not an ssh-ed25519 key");
  const pk = reader.string();
  if (pk.length !== 32 || !reader.done) throw new Error("malformed ssh-ed25519 key");
  return keyFromRaw(pk, undefined, comment);
}

/** An unencrypted OpenSSH-format Ed25519 private key (what `ssh-keygen -t ed25519 -N ""` writes). */
export function parseOpenSshPrivateKey(pem: string): Ed25519Key {
  const body = pem.replace(/-----(BEGIN|END) OPENSSH PRIVATE KEY-----/g, "").replace(/\s+/g, "");
  const reader = new Reader(Buffer.from(body, "base64"));
  if (!reader.bytes(15).equals(Buffer.from("openssh-key-v1\0", "latin1"))) throw new Error("not an OpenSSH private key");
  if (reader.string().toString() !== "none") throw new Error("encrypted private keys are not supported");
  reader.string(); // kdf name
  reader.string(); // kdf options
  if (reader.uint32() !== 1) throw new Error("expected one key");
  reader.string(); // public key blob
  const secret = new Reader(reader.string());
  secret.uint32();
  secret.uint32();
  if (secret.string().toString() !== "ssh-ed25519") throw new Error("only ssh-ed25519 private keys are supported by the emulator");
  const pk = secret.string();
  const sk = secret.string();
  const comment = secret.string().toString();
  return keyFromRaw(pk, sk.subarray(0, 32), comment);
}

function signedData(namespace: string, hashAlgorithm: string, message: Buffer): Buffer {
  const digest = createHash(hashAlgorithm).update(message).digest();
  return Buffer.concat([MAGIC, sshString(namespace), sshString(""), sshString(hashAlgorithm), sshString(digest)]);
}

/** The raw SSHSIG blob (the armored file's base64 body, decoded). */
export function sshsigSign(key: Ed25519Key, namespace: string, message: Buffer, hashAlgorithm = "sha512"): Buffer {
  if (!key.privateKey) throw new Error("signing needs the private key");
  const signature = sign(null, signedData(namespace, hashAlgorithm, message), key.privateKey);
  const version = Buffer.alloc(4);
  version.writeUInt32BE(1, 0);
  return Buffer.concat([
    MAGIC,
    version,
    sshString(key.blob),
    sshString(namespace),
    sshString(""),
    sshString(hashAlgorithm),
    sshString(Buffer.concat([sshString("ssh-ed25519"), sshString(signature)])),
  ]);
}

export interface ParsedSshsig {
  publicKeyBlob: Buffer;
  namespace: string;
  hashAlgorithm: string;
  signature: Buffer;
}

export function parseSshsig(blob: Buffer): ParsedSshsig {
  const reader = new Reader(blob);
  if (!reader.bytes(6).equals(MAGIC)) throw new Error("not an SSH signature");
  if (reader.uint32() !== 1) throw new Error("unsupported signature version");
  const publicKeyBlob = reader.string();
  const namespace = reader.string().toString();
  reader.string(); // reserved
  const hashAlgorithm = reader.string().toString();
  const signature = reader.string();
  if (!reader.done || (hashAlgorithm !== "sha512" && hashAlgorithm !== "sha256")) throw new Error("malformed signature");
  return { publicKeyBlob, namespace, hashAlgorithm, signature };
}

/** True when `sig` is `key`'s signature of `message` in `namespace`. */
export function sshsigVerify(sig: ParsedSshsig, key: Ed25519Key, namespace: string, message: Buffer): boolean {
  if (sig.namespace !== namespace || !sig.publicKeyBlob.equals(key.blob)) return false;
  const reader = new Reader(sig.signature);
  if (reader.string().toString() !== "ssh-ed25519") return false;
  const raw = reader.string();
  return verify(null, signedData(namespace, sig.hashAlgorithm, message), key.publicKey, raw);
}
