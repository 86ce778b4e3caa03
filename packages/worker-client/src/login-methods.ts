import type { PluginLoginPtyCloseResult, PluginLoginPtyOpenParams, PluginLoginPtyOpenResult } from "@paperclipai/plugin-sdk/protocol";
import type { CallFn, CallOptions } from "./environment-methods.js";
import type { LoginPtyListener, RpcConnection } from "./rpc-connection.js";

/** One open login pseudo-terminal as the host sees it: keystrokes in, output notifications out. */
export interface LoginPtyHandle extends PluginLoginPtyOpenResult {
  readonly hostRouteId: string;
  /** `loginPtyInput`: raw terminal input (`\r` is Enter). */
  input(data: string, opts?: CallOptions): Promise<void>;
  stop(opts?: CallOptions): Promise<void>;
  /** `loginPtyClose`, keyed by the host route id as the host does (with the host's 10 s timeout). */
  close(opts?: CallOptions): Promise<PluginLoginPtyCloseResult>;
}

export interface LoginPtyMethods {
  /**
   * `loginPtyOpen`, with the route's listener registered first (output may arrive before the open
   * reply, as the host allows). The listener stops at the exit notification.
   */
  open(params: PluginLoginPtyOpenParams, listener: LoginPtyListener, opts?: CallOptions): Promise<LoginPtyHandle>;
}

export function loginPtyMethods(call: CallFn, rpc: Pick<RpcConnection, "routeLoginPty">): LoginPtyMethods {
  return {
    async open(params, listener, opts) {
      const unroute = rpc.routeLoginPty(params.hostRouteId, listener);
      let opened: PluginLoginPtyOpenResult;
      try {
        opened = await call<PluginLoginPtyOpenResult>("loginPtyOpen", params, opts);
      } catch (error) {
        unroute();
        throw error;
      }
      const { workerSessionId } = opened;
      return {
        hostRouteId: params.hostRouteId,
        workerSessionId,
        input: (data, o) => call<void>("loginPtyInput", { workerSessionId, data }, o),
        stop: (o) => call<void>("loginPtyStop", { workerSessionId }, o),
        close: async (o) => {
          try {
            return await call<PluginLoginPtyCloseResult>("loginPtyClose", { hostRouteId: params.hostRouteId, workerSessionId }, o);
          } finally {
            unroute();
          }
        },
      };
    },
  };
}
