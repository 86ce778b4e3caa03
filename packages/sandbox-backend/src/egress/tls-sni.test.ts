import net from "node:net";
import tls from "node:tls";
import { describe, expect, it } from "vitest";
import { scanClientHello } from "./tls-sni.js";

/** Captures the first bytes a real TLS client sends for `servername`. */
async function captureClientHello(servername?: string): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  const captured = new Promise<Buffer>((resolve) => {
    server.once("connection", (socket) => {
      socket.once("data", (chunk: Buffer) => {
        resolve(chunk);
        socket.destroy();
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

describe("scanClientHello", () => {
  it("reads the server name a real TLS client sends", async () => {
    const hello = await captureClientHello("granted.example.com");
    expect(scanClientHello(hello)).toEqual({ kind: "tls", serverName: "granted.example.com" });
  });

  it("reports no server name when the client sends none", async () => {
    const hello = await captureClientHello(undefined);
    expect(scanClientHello(hello)).toEqual({ kind: "tls", serverName: null });
  });

  it("asks for more bytes until the first record is complete", async () => {
    const hello = await captureClientHello("a.example");
    expect(scanClientHello(hello.subarray(0, 3))).toEqual({ kind: "need-more" });
    expect(scanClientHello(hello.subarray(0, hello.length - 1))).toEqual({ kind: "need-more" });
  });

  it("treats non-handshake bytes as a plain protocol and garbage records as malformed", () => {
    expect(scanClientHello(Buffer.from("SSH-2.0-OpenSSH\r\n"))).toEqual({ kind: "not-tls" });
    const bogus = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x00, 0x10]);
    expect(scanClientHello(bogus)).toEqual({ kind: "malformed" });
  });
});
