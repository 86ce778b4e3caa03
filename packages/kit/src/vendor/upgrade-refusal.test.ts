import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiErrorFromUpgradeRefusal, type VendorErrorExtractor } from "./index.js";

// Not credential-shaped (no digit): only the registered secret can remove it.
const TOKEN = "quiet-owl-harbour-lantern-meadow";

/** A vendor that refuses every WebSocket upgrade with the status and body the path names. */
let server: Server;
let port: number;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === "/busy") res.writeHead(503, { "content-type": "application/json", "retry-after": "7" }).end(JSON.stringify({ message: "the agent is restarting" }));
    else if (req.url === "/gone") res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ message: `no workspace for ${TOKEN}` }));
    else res.writeHead(401).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** An upgrade request to `path`, and the HTTP response it got instead of a socket. */
function refusedUpgrade(path: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, headers: { connection: "Upgrade", upgrade: "websocket" } });
    req.on("response", resolve);
    req.on("error", reject);
    req.end();
  });
}

const messageOnly: VendorErrorExtractor = ({ json }) => (json && typeof json === "object" && "message" in json ? { message: String(json.message) } : {});

describe("apiErrorFromUpgradeRefusal", () => {
  it("reads the vendor's message and Retry-After, classifies the status, and says nothing was started", async () => {
    const error = await apiErrorFromUpgradeRefusal(await refusedUpgrade("/busy"), { vendor: "coder", operation: "agentPty", extractError: messageOnly });
    expect(error).toMatchObject({
      vendor: "coder",
      operation: "agentPty",
      status: 503,
      code: "http_503",
      detail: "the agent is restarting",
      retryable: true,
      gone: false,
      mayHaveTakenEffect: false,
      retryAfterMs: 7_000,
    });
  });

  it("keeps the upgrade's credential out of the error a vendor echoes it in", async () => {
    const error = await apiErrorFromUpgradeRefusal(await refusedUpgrade("/gone"), { vendor: "coder", operation: "runnerStream", extractError: messageOnly, secrets: [TOKEN] });
    expect(error).toMatchObject({ status: 404, gone: true, retryable: false });
    expect(JSON.stringify(error)).not.toContain(TOKEN);
    expect(error.detail).toContain("[REDACTED]");
  });

  it("still gives an error for a refusal with an empty body", async () => {
    const error = await apiErrorFromUpgradeRefusal(await refusedUpgrade("/other"), { vendor: "coder", operation: "agentPty" });
    expect(error).toMatchObject({ status: 401, code: "http_401", detail: "(empty body)", mayHaveTakenEffect: false });
  });
});
