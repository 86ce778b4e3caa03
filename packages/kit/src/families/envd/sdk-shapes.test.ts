import { describe, expect, it } from "vitest";
import { envdRpcEndpointOf, type EnvdSandboxLike } from "./sdk-shapes.js";

/** An SDK sandbox as both SDKs build it: the fields their envd transport reads. */
const sandbox = (extra: Record<string, unknown> = {}) =>
  ({
    sandboxId: "sbx-1",
    commands: {},
    files: {},
    envdApiUrl: "https://sandbox.example.test",
    envdPort: 49983,
    envdAccessToken: "token-1",
    connectionConfig: { headers: { "User-Agent": "sdk/1", "X-Custom": "c" } },
    ...extra,
  }) as unknown as EnvdSandboxLike;

describe("envdRpcEndpointOf: the URL and headers the SDK's envd transport uses", () => {
  it("e2b's: the routing pair under its prefix, the access token, only the user agent of the connection's headers", () => {
    expect(envdRpcEndpointOf(sandbox(), "E2b", "user-agent")).toEqual({
      baseUrl: "https://sandbox.example.test",
      headers: { "User-Agent": "sdk/1", "E2b-Sandbox-Id": "sbx-1", "E2b-Sandbox-Port": "49983", "X-Access-Token": "token-1" },
    });
  });

  it("Novita's: its own routing pair and every header of the connection", () => {
    expect(envdRpcEndpointOf(sandbox({ envdAccessToken: undefined }), "Novita", "all")?.headers).toEqual({
      "User-Agent": "sdk/1",
      "X-Custom": "c",
      "Novita-Sandbox-Id": "sbx-1",
      "Novita-Sandbox-Port": "49983",
    });
  });

  it("none through an HTTP proxy the SDK tunnels through, nor for an SDK without these fields", () => {
    expect(envdRpcEndpointOf(sandbox({ connectionConfig: { proxy: "http://proxy.test:3128" } }), "E2b", "user-agent")).toBeUndefined();
    expect(envdRpcEndpointOf(sandbox({ envdApiUrl: undefined }), "E2b", "user-agent")).toBeUndefined();
  });
});
