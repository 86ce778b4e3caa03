/**
 * Loopback stand-ins for "the internet" in egress tests: an HTTPS server with a throwaway
 * self-signed certificate and a plain HTTP server, both answering with a fixed body.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import os from "node:os";
import path from "node:path";

export interface TestServer {
  host: string;
  port: number;
  close(): Promise<void>;
}

export function selfSignedCert(commonName: string): { key: string; cert: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-cert-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        `/CN=${commonName}`,
        "-keyout",
        path.join(dir, "key.pem"),
        "-out",
        path.join(dir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    return { key: fs.readFileSync(path.join(dir, "key.pem"), "utf8"), cert: fs.readFileSync(path.join(dir, "cert.pem"), "utf8") };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function listen(server: net.Server, host: string): Promise<TestServer> {
  const sockets = new Set<net.Socket>();
  server.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  return new Promise((resolve) => {
    server.listen(0, host, () => {
      resolve({
        host,
        port: (server.address() as net.AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

export function startHttpsServer(host: string, body: string, cert = selfSignedCert("granted.test")): Promise<TestServer> {
  return listen(
    https.createServer(cert, (_req, res) => res.end(body)),
    host,
  );
}

export function startHttpServer(host: string, body: string): Promise<TestServer> {
  return listen(
    http.createServer((req, res) => res.end(`${body} host=${req.headers.host}`)),
    host,
  );
}
