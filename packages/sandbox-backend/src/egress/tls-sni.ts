/**
 * Reads the server name (SNI) a tunnelled TLS client asks for, so the egress proxy can check that a
 * client that CONNECTed to an allowed name is not asking the far end for a different one (fronting
 * through a shared CDN address). The ClientHello is reassembled from as many handshake records as
 * the client splits it into (a server does the same), then parsed strictly: anything a server might
 * read differently from this parser (a duplicate extension, two host names, trailing bytes, a
 * record of another type in the middle) is "malformed", and the proxy refuses it.
 */

export type ClientHelloScan =
  | { kind: "need-more" }
  /** The first byte is not a TLS handshake record: some other protocol. */
  | { kind: "not-tls" }
  /** `encryptedHello`: the hello carries ECH (or draft ESNI), so the name the server acts on is hidden. */
  | { kind: "tls"; serverName: string | null; encryptedHello: boolean }
  | { kind: "malformed"; reason: string };

/** Largest ClientHello message accepted (real ones are well under 4 KiB, post-quantum key shares included). */
export const MAX_CLIENT_HELLO_BYTES = 32 * 1024;
/** Largest amount of record-layer bytes read for one ClientHello (headers of small records included). */
const MAX_CLIENT_HELLO_RECORD_BYTES = 64 * 1024;

const HANDSHAKE_RECORD = 0x16;
const CLIENT_HELLO = 0x01;
const EXTENSION_SERVER_NAME = 0x0000;
const EXTENSION_ECH = 0xfe0d;
const EXTENSION_ESNI_DRAFT = 0xffce;
const NEED_MORE: ClientHelloScan = Object.freeze({ kind: "need-more" });
const HOST_NAME = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?$/;

/**
 * Incremental reader of the first bytes a client sends: feed it chunks as they arrive; it keeps
 * only what it still needs and does O(total bytes) work however the bytes are chunked.
 */
export class ClientHelloReader {
  #result: ClientHelloScan | null = null;
  #pending: Buffer[] = [];
  #pendingLength = 0;
  #recordBytes = 0;
  #records = 0;
  #handshake: Buffer[] = [];
  #handshakeLength = 0;
  #messageLength = -1;

  push(chunk: Buffer): ClientHelloScan {
    if (this.#result) return this.#result;
    if (chunk.length === 0) return NEED_MORE;
    this.#pending.push(chunk);
    this.#pendingLength += chunk.length;
    for (;;) {
      // The content type alone says whether this is TLS: a plain protocol is told at its first byte.
      if (this.#pendingLength > 0 && this.#pending[0]![0] !== HANDSHAKE_RECORD) {
        return this.#finish(this.#records === 0 ? { kind: "not-tls" } : malformed("a record of another type arrived before the ClientHello was complete"));
      }
      if (this.#pendingLength < 5) return NEED_MORE;
      const header = this.#peek(5);
      if (header[1] !== 0x03) return this.#finish(malformed("not a TLS record version"));
      const length = header.readUInt16BE(3);
      if (length === 0) return this.#finish(malformed("an empty handshake record"));
      if (length > 16 * 1024) return this.#finish(malformed("a record longer than 16 KiB"));
      if (this.#recordBytes + 5 + length > MAX_CLIENT_HELLO_RECORD_BYTES) return this.#finish(malformed("the ClientHello spans more than 64 KiB of records"));
      if (this.#pendingLength < 5 + length) return NEED_MORE;
      const record = this.#take(5 + length);
      this.#records++;
      this.#recordBytes += record.length;
      this.#handshake.push(record.subarray(5));
      this.#handshakeLength += length;
      if (this.#messageLength < 0 && this.#handshakeLength >= 4) {
        const head = Buffer.concat(this.#handshake).subarray(0, 4);
        if (head[0] !== CLIENT_HELLO) return this.#finish(malformed("the first handshake message is not a ClientHello"));
        this.#messageLength = head.readUIntBE(1, 3);
        if (this.#messageLength > MAX_CLIENT_HELLO_BYTES) return this.#finish(malformed("the ClientHello is longer than 32 KiB"));
      }
      if (this.#messageLength >= 0 && this.#handshakeLength >= 4 + this.#messageLength) {
        const message = Buffer.concat(this.#handshake).subarray(4, 4 + this.#messageLength);
        try {
          return this.#finish({ kind: "tls", ...readClientHello(message) });
        } catch (error) {
          return this.#finish(malformed((error as Error).message));
        }
      }
    }
  }

  #finish(result: ClientHelloScan): ClientHelloScan {
    this.#result = result;
    this.#pending = [];
    this.#handshake = [];
    return result;
  }

  #peek(bytes: number): Buffer {
    if (this.#pending[0]!.length < bytes) this.#pending = [Buffer.concat(this.#pending)];
    return this.#pending[0]!.subarray(0, bytes);
  }

  #take(bytes: number): Buffer {
    if (this.#pending[0]!.length < bytes) this.#pending = [Buffer.concat(this.#pending)];
    const first = this.#pending[0]!;
    const taken = first.subarray(0, bytes);
    if (first.length === bytes) this.#pending.shift();
    else this.#pending[0] = first.subarray(bytes);
    this.#pendingLength -= bytes;
    return taken;
  }
}

/** One-shot scan of the bytes received so far (a fresh reader each call). */
export function scanClientHello(data: Buffer): ClientHelloScan {
  return new ClientHelloReader().push(data);
}

function malformed(reason: string): ClientHelloScan {
  return { kind: "malformed", reason };
}

/** Parses a whole ClientHello body (after the 4-byte handshake header); throws with the reason it is unreadable. */
function readClientHello(hello: Buffer): { serverName: string | null; encryptedHello: boolean } {
  let offset = 0;
  const need = (bytes: number, what: string) => {
    if (offset + bytes > hello.length) throw new Error(`the ClientHello is truncated in its ${what}`);
  };
  need(2 + 32, "version and random");
  offset += 34;
  need(1, "session id");
  const sessionIdLength = hello[offset]!;
  if (sessionIdLength > 32) throw new Error("the ClientHello's session id is longer than 32 bytes");
  offset += 1;
  need(sessionIdLength, "session id");
  offset += sessionIdLength;
  need(2, "cipher suites");
  const suitesLength = hello.readUInt16BE(offset);
  if (suitesLength < 2 || suitesLength % 2 !== 0) throw new Error("the ClientHello's cipher suite list is malformed");
  offset += 2;
  need(suitesLength, "cipher suites");
  offset += suitesLength;
  need(1, "compression methods");
  const compressionLength = hello[offset]!;
  if (compressionLength < 1) throw new Error("the ClientHello lists no compression method");
  offset += 1;
  need(compressionLength, "compression methods");
  offset += compressionLength;
  if (offset === hello.length) return { serverName: null, encryptedHello: false }; // no extensions (TLS 1.0/1.1 style)
  need(2, "extensions");
  const extensionsLength = hello.readUInt16BE(offset);
  offset += 2;
  if (offset + extensionsLength !== hello.length) throw new Error("the ClientHello's extensions do not end where the message does");
  const seen = new Set<number>();
  let serverName: string | null = null;
  let encryptedHello = false;
  while (offset < hello.length) {
    need(4, "extensions");
    const type = hello.readUInt16BE(offset);
    const length = hello.readUInt16BE(offset + 2);
    offset += 4;
    need(length, "extensions");
    if (seen.has(type)) throw new Error(`the ClientHello repeats extension ${type}`);
    seen.add(type);
    if (type === EXTENSION_SERVER_NAME) serverName = readServerName(hello.subarray(offset, offset + length));
    if (type === EXTENSION_ECH || type === EXTENSION_ESNI_DRAFT) encryptedHello = true;
    offset += length;
  }
  return { serverName, encryptedHello };
}

/** server_name extension data: list length, then entries of (type u8, length u16, name); one host_name at most. */
function readServerName(data: Buffer): string {
  if (data.length < 2 || data.readUInt16BE(0) !== data.length - 2) throw new Error("the server_name extension's list length is wrong");
  let offset = 2;
  let hostName: string | null = null;
  while (offset < data.length) {
    if (offset + 3 > data.length) throw new Error("the server_name extension is truncated");
    const nameType = data[offset]!;
    const nameLength = data.readUInt16BE(offset + 1);
    offset += 3;
    if (offset + nameLength > data.length) throw new Error("the server_name extension is truncated");
    const name = data.subarray(offset, offset + nameLength);
    offset += nameLength;
    if (nameType !== 0) continue;
    if (hostName !== null) throw new Error("the server_name extension names two hosts");
    hostName = name.toString("latin1");
    if (hostName.length > 255 || !HOST_NAME.test(hostName)) throw new Error("the server name is not a host name");
  }
  if (hostName === null) throw new Error("the server_name extension names no host");
  return hostName;
}
