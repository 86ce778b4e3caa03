import { JSONRPC_ERROR_CODES, PLUGIN_RPC_ERROR_CODES } from "@paperclipai/plugin-sdk";

// Re-exported one by one so callers can match on a named code without importing the SDK.
export const WORKER_UNAVAILABLE = PLUGIN_RPC_ERROR_CODES.WORKER_UNAVAILABLE;
export const CAPABILITY_DENIED = PLUGIN_RPC_ERROR_CODES.CAPABILITY_DENIED;
export const WORKER_ERROR = PLUGIN_RPC_ERROR_CODES.WORKER_ERROR;
export const TIMEOUT = PLUGIN_RPC_ERROR_CODES.TIMEOUT;
export const METHOD_NOT_IMPLEMENTED = PLUGIN_RPC_ERROR_CODES.METHOD_NOT_IMPLEMENTED;
export const INVOCATION_SCOPE_DENIED = PLUGIN_RPC_ERROR_CODES.INVOCATION_SCOPE_DENIED;
export const CROSS_TENANT_CONFIG = PLUGIN_RPC_ERROR_CODES.CROSS_TENANT_CONFIG;
export const UNKNOWN = PLUGIN_RPC_ERROR_CODES.UNKNOWN;
export const METHOD_NOT_FOUND = JSONRPC_ERROR_CODES.METHOD_NOT_FOUND;
export { PLUGIN_RPC_ERROR_CODES, JSONRPC_ERROR_CODES };

/** A host→worker call that failed: the worker's JSON-RPC error, or a host-side timeout / worker exit. */
export class WorkerRpcError extends Error {
  override readonly name = "WorkerRpcError";
  readonly code: number;
  readonly method: string;
  readonly data: unknown;

  constructor(method: string, code: number, message: string, data?: unknown) {
    super(`${method}: ${message} (code ${code})`);
    this.method = method;
    this.code = code;
    this.data = data;
  }
}
