import { encodeChannelBytes } from "@paperclipai/plugin-sdk";
import { describe, expect, it } from "vitest";
import { duplexMethods } from "./duplex-methods.js";
import { RpcConnection } from "./rpc-connection.js";

const notification = (method: string, params: Record<string, unknown>) => JSON.stringify({ jsonrpc: "2.0", method, params });

describe("duplex channel notifications", () => {
  it("reach the listener of their route only, in order, and stop after the exit", () => {
    const rpc = new RpcConnection(() => undefined);
    const seen: string[] = [];
    rpc.routeDuplex("route-a", {
      onData: (chunk, session) => seen.push(`a:${session}:${chunk.toString()}`),
      onExit: (exit) => seen.push(`a:exit:${exit.exitCode}:${exit.transportClosed}`),
    });
    rpc.routeDuplex("route-b", { onData: (chunk) => seen.push(`b:${chunk.toString()}`), onExit: () => seen.push("b:exit") });
    const data = (route: string, text: string) => rpc.handleLine(notification("duplexChannel.data", { hostRouteId: route, workerSessionId: "s1", chunk: encodeChannelBytes(Buffer.from(text)) }));
    data("route-a", "one");
    data("route-b", "x");
    data("route-a", "two");
    data("route-unknown", "dropped");
    rpc.handleLine(notification("duplexChannel.data", { hostRouteId: "route-a", workerSessionId: "s1", chunk: "%%bad" }));
    rpc.handleLine(notification("duplexChannel.exit", { hostRouteId: "route-a", workerSessionId: "s1", exitCode: 0 }));
    data("route-a", "after exit");
    rpc.handleLine(notification("duplexChannel.exit", { hostRouteId: "route-b", workerSessionId: "s2", exitCode: null, transportClosed: true }));
    expect(seen).toEqual(["a:s1:one", "b:x", "a:s1:two", "a:exit:0:false", "b:exit"]);
  });

  it("open registers the route before the request and sends writes as base64 on the bound pair", async () => {
    const sent: Array<{ method: string; params: Record<string, unknown> }> = [];
    const routed: string[] = [];
    const methods = duplexMethods(
      async <T>(method: string, params: unknown) => {
        sent.push({ method, params: params as Record<string, unknown> });
        if (method === "duplexChannelOpen") {
          expect(routed).toEqual(["route-1"]); // listener first: data may beat the reply
          return { hostRouteId: "route-1", workerSessionId: "session-9" } as T;
        }
        return { hostRouteId: "route-1", workerSessionId: "session-9" } as T;
      },
      { routeDuplex: (route) => (routed.push(route), () => routed.splice(routed.indexOf(route), 1)) },
    );
    const handle = await methods.open(
      { hostRouteId: "route-1", driverKey: "d", companyId: "c", environmentId: "e", providerLeaseId: "l", command: ["cat"] },
      { onData: () => undefined, onExit: () => undefined },
    );
    await handle.write(Buffer.from([0, 255, 10]));
    await handle.close();
    expect(sent.map((s) => s.method)).toEqual(["duplexChannelOpen", "duplexChannelWrite", "duplexChannelClose"]);
    expect(sent[1]!.params).toEqual({ hostRouteId: "route-1", workerSessionId: "session-9", data: Buffer.from([0, 255, 10]).toString("base64") });
    expect(routed).toEqual([]);
  });
});
