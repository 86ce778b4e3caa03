export { loadPluginPackage, type PluginPackage } from "./plugin-package.js";
export { startWorker, type StartWorkerOptions, type WorkerClient, type WorkerExit } from "./worker-client.js";
export {
  ENVIRONMENT_METHOD_NAMES,
  type CallOptions,
  type EnvironmentMethods,
} from "./environment-methods.js";
export {
  WorkerRpcError,
  WORKER_UNAVAILABLE,
  CAPABILITY_DENIED,
  WORKER_ERROR,
  TIMEOUT,
  METHOD_NOT_IMPLEMENTED,
  INVOCATION_SCOPE_DENIED,
  CROSS_TENANT_CONFIG,
  UNKNOWN,
  METHOD_NOT_FOUND,
  PLUGIN_RPC_ERROR_CODES,
  JSONRPC_ERROR_CODES,
} from "./errors.js";
export { buildWorkerEnv } from "./worker-env.js";
export type { DuplexChannelHandle, DuplexMethods } from "./duplex-methods.js";
export type { DuplexChannelListener, LoginPtyListener } from "./rpc-connection.js";
export type { LoginPtyHandle, LoginPtyMethods } from "./login-methods.js";
export {
  hostTimeoutFor,
  DEFAULT_CALL_TIMEOUT_MS,
  PROBE_TIMEOUT_MS,
  EXECUTION_OVERHEAD_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  LOGIN_PTY_CLOSE_TIMEOUT_MS,
} from "./timeouts.js";
