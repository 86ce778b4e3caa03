/**
 * Reads the server name (SNI) from the first TLS record of a tunnelled connection, so the egress
 * proxy can check that a client that CONNECTed to an allowed name is not asking the far end for a
 * different one (domain fronting through a shared CDN address).
 */

export type ClientHelloScan =
  | { kind: "need-more" }
  | { kind: "not-tls" }
  | { kind: "tls"; serverName: string | null }
  | { kind: "malformed" };

/** Largest first record we wait for: a TLS record is at most 16 KiB plus its 5-byte header. */
export const MAX_CLIENT_HELLO_BYTES = 16 * 1024 + 5;

export function scanClientHello(data: Buffer): ClientHelloScan {
  if (data.length === 0) return { kind: "need-more" };
  if (data[0] !== 0x16) return { kind: "not-tls" }; // not a handshake record: plain TCP protocol
  if (data.length < 5) return { kind: "need-more" };
  const recordLength = data.readUInt16BE(3);
  if (recordLength > 16 * 1024) return { kind: "malformed" };
  if (data.length < 5 + recordLength) return { kind: "need-more" };
  const body = data.subarray(5, 5 + recordLength);
  try {
    return { kind: "tls", serverName: serverNameFromHandshake(body) };
  } catch {
    return { kind: "malformed" };
  }
}

function serverNameFromHandshake(hs: Buffer): string | null {
  let offset = 0;
  const need = (bytes: number) => {
    if (offset + bytes > hs.length) throw new Error("truncated");
  };
  need(4);
  if (hs[0] !== 0x01) throw new Error("not a ClientHello");
  offset = 4; // type + 24-bit length (a ClientHello split over records leaves the rest unread)
  need(2 + 32); // client_version + random
  offset += 34;
  need(1);
  offset += 1 + hs[offset]!; // session id
  need(2);
  offset += 2 + hs.readUInt16BE(offset); // cipher suites
  need(1);
  offset += 1 + hs[offset]!; // compression methods
  if (offset === hs.length) return null; // no extensions
  need(2);
  const extensionsEnd = offset + 2 + hs.readUInt16BE(offset);
  offset += 2;
  while (offset + 4 <= Math.min(extensionsEnd, hs.length)) {
    const type = hs.readUInt16BE(offset);
    const length = hs.readUInt16BE(offset + 2);
    offset += 4;
    need(length);
    if (type === 0x0000) {
      // server_name: list length, then entries of (type u8, length u16, name)
      let entry = offset + 2;
      const listEnd = offset + 2 + hs.readUInt16BE(offset);
      while (entry + 3 <= listEnd) {
        const nameType = hs[entry]!;
        const nameLength = hs.readUInt16BE(entry + 1);
        if (entry + 3 + nameLength > listEnd) throw new Error("truncated");
        if (nameType === 0) return hs.subarray(entry + 3, entry + 3 + nameLength).toString("ascii");
        entry += 3 + nameLength;
      }
      return null;
    }
    offset += length;
  }
  return null;
}
