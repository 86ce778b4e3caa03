import { encodeChannelBytes } from "@paperclipai/plugin-sdk";
import type { PluginDuplexChannelCloseResult, PluginDuplexChannelOpenParams, PluginDuplexChannelOpenResult } from "@paperclipai/plugin-sdk/protocol";
import type { CallFn, CallOptions } from "./environment-methods.js";
import type { DuplexChannelListener, RpcConnection } from "./rpc-connection.js";

/** One open duplex channel as the host sees it: bytes in, notifications out. */
export interface DuplexChannelHandle extends PluginDuplexChannelOpenResult {
  write(bytes: Uint8Array, opts?: CallOptions): Promise<void>;
  stop(opts?: CallOptions): Promise<void>;
  close(opts?: CallOptions): Promise<PluginDuplexChannelCloseResult>;
}

export interface DuplexMethods {
  /**
   * `duplexChannelOpen`, with the route's listener registered first (as the host does: data may
   * arrive before the open reply). The listener stops at the channel's exit notification.
   */
  open(params: PluginDuplexChannelOpenParams, listener: DuplexChannelListener, opts?: CallOptions): Promise<DuplexChannelHandle>;
}

export function duplexMethods(call: CallFn, rpc: Pick<RpcConnection, "routeDuplex">): DuplexMethods {
  return {
    async open(params, listener, opts) {
      const unroute = rpc.routeDuplex(params.hostRouteId, listener);
      let opened: PluginDuplexChannelOpenResult;
      try {
        opened = await call<PluginDuplexChannelOpenResult>("duplexChannelOpen", params, opts);
      } catch (error) {
        unroute();
        throw error;
      }
      const pair = { hostRouteId: opened.hostRouteId, workerSessionId: opened.workerSessionId };
      return {
        ...pair,
        write: (bytes, o) => call<void>("duplexChannelWrite", { ...pair, data: encodeChannelBytes(bytes) }, o),
        stop: (o) => call<void>("duplexChannelStop", pair, o),
        close: async (o) => {
          try {
            return await call<PluginDuplexChannelCloseResult>("duplexChannelClose", pair, o);
          } finally {
            unroute();
          }
        },
      };
    },
  };
}
