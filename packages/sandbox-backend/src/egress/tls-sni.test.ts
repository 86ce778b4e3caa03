import net from "node:net";
import tls from "node:tls";
import { describe, expect, it } from "vitest";
import { ClientHelloReader, MAX_CLIENT_HELLO_BYTES, scanClientHello } from "./tls-sni.js";

/** Captures the first TLS record a real TLS client (OpenSSL, through node) sends for `servername`. */
async function captureClientHello(servername?: string): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  const captured = new Promise<Buffer>((resolve) => {
    server.once("connection", (socket) => {
      let data = Buffer.alloc(0);
      socket.on("data", (chunk: Buffer) => {
        data = Buffer.concat([data, chunk]);
        if (data.length >= 5 && data.length >= 5 + data.readUInt16BE(3)) {
          resolve(data.subarray(0, 5 + data.readUInt16BE(3)));
          socket.destroy();
        }
      });
    });
  });
  const client = tls.connect({ host: "127.0.0.1", port, servername, rejectUnauthorized: false });
  client.on("error", () => undefined);
  const hello = await captured;
  client.destroy();
  server.close();
  return hello;
}

/** Re-frames a one-record ClientHello as records cut at the given offsets of the handshake message. */
function reframe(record: Buffer, cuts: number[]): Buffer {
  const hs = record.subarray(5);
  const points = [0, ...cuts, hs.length];
  return Buffer.concat(
    points.slice(1).map((end, i) => {
      const body = hs.subarray(points[i]!, end);
      const header = Buffer.from([0x16, record[1]!, record[2]!, 0, 0]);
      header.writeUInt16BE(body.length, 3);
      return Buffer.concat([header, body]);
    }),
  );
}

/** Offset in a ClientHello handshake message just past its extensions length field. */
function afterExtensionsLength(hs: Buffer): number {
  let offset = 4 + 2 + 32;
  offset += 1 + hs[offset]!;
  offset += 2 + hs.readUInt16BE(offset);
  offset += 1 + hs[offset]!;
  return offset + 2;
}

const u16 = (value: number) => Buffer.from([value >> 8, value & 0xff]);

/** A minimal ClientHello record with these extensions (type, data), for cases no real client sends. */
function helloWith(extensions: [number, Buffer][], options: { trailing?: Buffer; handshakeType?: number } = {}): Buffer {
  const body = Buffer.concat([
    Buffer.from([0x03, 0x03]),
    Buffer.alloc(32, 7),
    Buffer.from([0]),
    u16(2),
    Buffer.from([0x13, 0x01]),
    Buffer.from([1, 0]),
    u16(extensions.reduce((sum, [, data]) => sum + 4 + data.length, 0)),
    ...extensions.flatMap(([type, data]) => [u16(type), u16(data.length), data]),
    options.trailing ?? Buffer.alloc(0),
  ]);
  const hs = Buffer.concat([Buffer.from([options.handshakeType ?? 1, 0, body.length >> 8, body.length & 0xff]), body]);
  return Buffer.concat([Buffer.from([0x16, 0x03, 0x01]), u16(hs.length), hs]);
}

function serverNameExtension(...names: [number, string][]): [number, Buffer] {
  const entries = Buffer.concat(names.map(([type, name]) => Buffer.concat([Buffer.from([type]), u16(name.length), Buffer.from(name, "latin1")])));
  return [0, Buffer.concat([u16(entries.length), entries])];
}

describe("scanClientHello", () => {
  it("reads the server name a real TLS client sends", async () => {
    const hello = await captureClientHello("granted.example.com");
    expect(scanClientHello(hello)).toEqual({ kind: "tls", serverName: "granted.example.com", encryptedHello: false });
  });

  it("reports no server name when the client sends none", async () => {
    const hello = await captureClientHello(undefined);
    expect(scanClientHello(hello)).toEqual({ kind: "tls", serverName: null, encryptedHello: false });
  });

  it("asks for more bytes until the ClientHello is complete", async () => {
    const hello = await captureClientHello("a.example");
    expect(scanClientHello(hello.subarray(0, 3))).toEqual({ kind: "need-more" });
    expect(scanClientHello(hello.subarray(0, hello.length - 1))).toEqual({ kind: "need-more" });
  });

  it("attack: reads the server name of a ClientHello split across two records right after the extensions length", async () => {
    const hello = await captureClientHello("denied.test");
    const split = reframe(hello, [afterExtensionsLength(hello.subarray(5))]);
    expect(scanClientHello(split)).toEqual({ kind: "tls", serverName: "denied.test", encryptedHello: false });
  });

  it("reassembles a ClientHello from one-byte records fed one byte at a time", async () => {
    const hello = await captureClientHello("granted.test");
    const tiny = reframe(
      hello,
      Array.from({ length: hello.length - 6 }, (_, i) => i + 1),
    );
    const reader = new ClientHelloReader();
    let scan = reader.push(Buffer.alloc(0));
    for (let i = 0; i < tiny.length; i++) {
      expect(scan).toEqual({ kind: "need-more" });
      scan = reader.push(tiny.subarray(i, i + 1));
    }
    expect(scan).toEqual({ kind: "tls", serverName: "granted.test", encryptedHello: false });
  });

  it("treats non-handshake first bytes as a plain protocol", () => {
    expect(scanClientHello(Buffer.from("SSH-2.0-OpenSSH\r\n"))).toEqual({ kind: "not-tls" });
    expect(scanClientHello(Buffer.from("GET / HTTP/1.1\r\n"))).toEqual({ kind: "not-tls" });
    // One byte is enough to tell: a client that sends a single byte is not left waiting.
    expect(scanClientHello(Buffer.from("x"))).toEqual({ kind: "not-tls" });
    expect(scanClientHello(Buffer.from([0x16]))).toEqual({ kind: "need-more" });
  });

  it("flags Encrypted Client Hello (and draft ESNI), which hides the name the server acts on", () => {
    expect(scanClientHello(helloWith([serverNameExtension([0, "granted.test"]), [0xfe0d, Buffer.alloc(40, 1)]]))).toEqual({
      kind: "tls",
      serverName: "granted.test",
      encryptedHello: true,
    });
    expect(scanClientHello(helloWith([[0xffce, Buffer.alloc(20, 1)]]))).toMatchObject({ kind: "tls", encryptedHello: true });
  });

  it.each([
    [
      "a record of another type inside the ClientHello",
      () => {
        const hello = helloWith([serverNameExtension([0, "granted.test"])]);
        const [first, second] = [reframe(hello, [10]).subarray(0, 15), reframe(hello, [10]).subarray(15)];
        return Buffer.concat([first, Buffer.from([0x17, 0x03, 0x03, 0x00, 0x01, 0x00]), second]);
      },
      /a record of another type/,
    ],
    ["an empty handshake record", () => Buffer.from([0x16, 0x03, 0x01, 0x00, 0x00]), /empty handshake record/],
    ["a record that is not TLS", () => Buffer.from([0x16, 0x09, 0x01, 0x00, 0x04]), /not a TLS record version/],
    ["a handshake message that is not a ClientHello", () => helloWith([], { handshakeType: 2 }), /not a ClientHello/],
    ["a repeated extension", () => helloWith([serverNameExtension([0, "granted.test"]), serverNameExtension([0, "denied.test"])]), /repeats extension 0/],
    ["two host names", () => helloWith([serverNameExtension([0, "granted.test"], [0, "denied.test"])]), /names two hosts/],
    ["bytes after the extensions", () => helloWith([serverNameExtension([0, "granted.test"])], { trailing: Buffer.from([0, 0, 0, 0]) }), /do not end where the message does/],
    ["a server name that is not a host name", () => helloWith([serverNameExtension([0, "granted.test\u0000.denied.test"])]), /not a host name/],
    ["a server name with high-bit bytes", () => helloWith([serverNameExtension([0, "gr\u00e1nted.test"])]), /not a host name/],
    ["a server_name extension without a host", () => helloWith([serverNameExtension()]), /list length is wrong|names no host/],
    [
      "a ClientHello longer than the cap",
      () => {
        const header = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0, 0, 0]);
        header.writeUIntBE(MAX_CLIENT_HELLO_BYTES + 1, 6, 3);
        return header;
      },
      /longer than 32 KiB/,
    ],
  ])("refuses %s as malformed", (_what, build, reason) => {
    const scan = scanClientHello(build());
    expect(scan.kind).toBe("malformed");
    expect(scan.kind === "malformed" && scan.reason).toMatch(reason);
  });

  it("refuses a ClientHello spread over more than 64 KiB of records", () => {
    const header = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0, 0x7f, 0xff]);
    const reader = new ClientHelloReader();
    let scan = reader.push(header);
    // 32 KiB of ClientHello in 1-byte records takes 6 bytes of records per byte of hello.
    const oneByteRecord = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x01, 0x00]);
    for (let i = 0; i < 20_000 && scan.kind === "need-more"; i++) scan = reader.push(oneByteRecord);
    expect(scan).toEqual({ kind: "malformed", reason: "the ClientHello spans more than 64 KiB of records" });
  });
});
