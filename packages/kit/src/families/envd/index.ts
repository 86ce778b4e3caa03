// E2B-family (e2b, novita-sandbox) plumbing: envd's process service as a streamed runner, its
// /files API as a FileTransport, SDK errors as ProviderApiError, and the lifecycle on the kit's layer.
export { defineEnvdSandboxProvider, ENVD_EXPIRES_AT_KEY, ENVD_TRANSPORT } from "./provider.js";
export { envdPty, type EnvdPtyOptions } from "./pty.js";
export type { EnvdControlPlane, EnvdHandle, EnvdListedSandbox, EnvdProviderSpec, EnvdSandboxInfo, EnvdSnapshots } from "./provider.js";
export { envdProcessApi, envdExitOf, type EnvdProcessApiOptions } from "./process-api.js";
export { envdFileTransport, type EnvdFileTransportOptions } from "./file-transport.js";
export { envdApiError, envdCall, SANDBOX_NOT_RUNNING, type EnvdCallOptions, type EnvdErrorContext } from "./errors.js";
export { envdRpcEndpointOf, processRpcOf, ENVD_SIGNAL } from "./sdk-shapes.js";
export { openEnvdStreamInput, type EnvdRpcEndpoint, type EnvdStreamInput } from "./stream-input.js";
export { envdUrlFields, missingApiKeyWarnings } from "./config.js";
export type { EnvdFiles, EnvdProcessEvent, EnvdProcessRpc, EnvdSandboxLike } from "./sdk-shapes.js";
