/**
 * A template whose startup script starts a small app in the workspace (node from the host tree):
 * HTTP answers with what it received (method, path, cookies, body size, the request's headers) or,
 * on `/status/<code>`, that status (no `Location`); on `/redirect/<code>?to=<url>`, that status with
 * `Location: <url>`; on `/hops/<n>`, a 302 to `/hops/<n-1>` down to a 200 at `/hops/0`; and
 * `/ws` echoes WebSocket text frames (a bare RFC 6455 server: short frames only, enough for a test).
 */
import type { TemplateSpec } from "../options.js";

const APP = String.raw`
const http = require("http"), crypto = require("crypto");
const server = http.createServer((q, s) => {
  let n = 0;
  q.on("data", (c) => (n += c.length));
  q.on("end", () => {
    if (q.url === "/healthz") return s.end("ok");
    if (q.url.startsWith("/status/")) return (s.statusCode = Number(q.url.slice(8))), s.end();
    if (q.url.startsWith("/redirect/")) {
      const u = new URL(q.url, "http://app");
      return (s.statusCode = Number(u.pathname.slice(10))), s.setHeader("location", u.searchParams.get("to")), s.end();
    }
    if (q.url.startsWith("/hops/")) {
      const left = Number(q.url.slice(6));
      return left > 0 ? ((s.statusCode = 302), s.setHeader("location", "/hops/" + (left - 1)), s.end()) : s.end("ok");
    }
    s.setHeader("content-type", "application/json");
    s.end(JSON.stringify({ method: q.method, url: q.url, bytes: n, headers: q.headers, cwd: process.cwd(), user: process.env.USER, home: process.env.HOME }));
  });
});
server.on("upgrade", (q, sock) => {
  const accept = crypto.createHash("sha1").update(q.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
  sock.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n");
  sock.on("data", (b) => {
    const op = b[0] & 15, len = b[1] & 127, mask = b.subarray(2, 6), data = Buffer.from(b.subarray(6, 6 + len));
    for (let i = 0; i < data.length; i++) data[i] ^= mask[i & 3];
    if (op === 8) return sock.end(Buffer.from([0x88, 2, 3, 232]));
    const text = Buffer.from("echo:" + data.toString());
    sock.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
  });
});
server.listen(4200, "127.0.0.1");
`;

export function echoAppTemplate(name = "echo", extra: Partial<TemplateSpec> = {}): TemplateSpec {
  return {
    name,
    agent: {
      name: "main",
      startupScript: `cat > ~/app.js <<'EOF'\n${APP}\nEOF\nnohup node ~/app.js >~/app.log 2>&1 &\n`,
      apps: [{ slug: "echo", url: "http://localhost:4200", share: "owner", healthcheck: { url: "http://localhost:4200/healthz", interval: 1, threshold: 3 } }],
    },
    ...extra,
  };
}
