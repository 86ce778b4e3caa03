export { STREAM_TRANSPORT, abortedExit, timedOutExit } from "./transport.js";
export type { ScriptRunner, ScriptIo, ScriptExit, TransportCapabilities, TerminationReason, FileTransport, PtyTransport, PtySpec, PtySize, PtyProcess, PtyExit, PtySignal } from "./transport.js";
export * from "./config/index.js";
export * from "./probe/index.js";
export * from "./exec/index.js";
export * from "./sync/index.js";
export * from "./lease/index.js";
export * from "./egress/index.js";
export * from "./redact/index.js";
export * from "./plugin/index.js";
export * from "./duplex/index.js";
export * from "./login/index.js";
export * from "./setup-terminal/index.js";
export * from "./transports/index.js";
export * from "./provider/index.js";
export * from "./vendor/index.js";
// Exit-marker parsing for providers whose exec API streams output but reports no exit (daytona sessions).
export { ExitMarkerScanner } from "./transports/exit-marker.js";
// A create retried without making two resources (a nonce label, looked up after a lost answer).
export { createIdempotently, type IdempotentCreateOptions } from "./vendor/idempotent-create.js";
export { createStreamedProcessRunner } from "./transports/streamed-process-runner.js";
export type { StreamedProcess, StreamedProcessApi, StreamedProcessExit, StreamedProcessOutput, StreamedProcessRunnerOptions, StreamedProcessSpec } from "./transports/streamed-process-runner.js";
export { cappedTtlMs, createTtlKeepers, keepTtlAlive, SECOND_MS } from "./lease/ttl-keeper.js";
export type { TtlKeeper, TtlKeeperOptions, TtlKeepers } from "./lease/ttl-keeper.js";
// Vendor families: mechanics one group of vendors shares (see families/README.md).
export * from "./families/envd/index.js";
export * from "./families/kubernetes/index.js";
