import { describe, expect, it } from "vitest";
import { defineSandboxProviderManifest } from "../plugin/manifest.js";
import { STREAM_TRANSPORT, type TransportCapabilities } from "../transport.js";
import { deriveSandboxCapabilities } from "./capabilities.js";

const BUFFERED: TransportCapabilities = { ...STREAM_TRANSPORT, stdin: "buffered", liveOutput: false };

function manifestFor(transport: TransportCapabilities) {
  return defineSandboxProviderManifest({
    id: "paperclip-sandbox.test",
    version: "0.0.0",
    displayName: "test",
    description: "test",
    driver: { driverKey: "test", displayName: "test", configSchema: { type: "object" } },
    shape: { transport, keepsLeases: false },
  }).environmentDrivers![0]!;
}

describe("incrementalSessionOutput follows the transport's live output", () => {
  it("is declared by a transport that delivers a running command's output live", () => {
    expect(deriveSandboxCapabilities({ transport: STREAM_TRANSPORT, keepsLeases: false, concurrentSync: true }).incrementalSessionOutput).toBe(true);
    expect(manifestFor(STREAM_TRANSPORT).sandboxCapabilities?.incrementalSessionOutput).toBe(true);
  });

  it("is not declared by a transport whose output arrives when the command ends", () => {
    expect(deriveSandboxCapabilities({ transport: BUFFERED, keepsLeases: false, concurrentSync: true }).incrementalSessionOutput).toBe(false);
    expect(manifestFor(BUFFERED).sandboxCapabilities?.incrementalSessionOutput).toBe(false);
  });

  it("needs only live output, not the duplex pipe (a buffered-stdin transport with live output declares it)", () => {
    const liveButBuffered = { ...BUFFERED, liveOutput: true };
    const caps = deriveSandboxCapabilities({ transport: liveButBuffered, keepsLeases: false, concurrentSync: true });
    expect(caps).toMatchObject({ incrementalSessionOutput: true, duplexCommandStream: false });
  });

  it("never reaches a runnerWebSocketIngress declaration (no provider offers an ingress endpoint)", () => {
    expect(manifestFor(STREAM_TRANSPORT).sandboxCapabilities).not.toHaveProperty("runnerWebSocketIngress");
  });
});
