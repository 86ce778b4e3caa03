export type { ScriptRunner, ScriptIo, ScriptExit } from "./transport.js";
export * from "./config/index.js";
export * from "./exec/index.js";
export * from "./sync/index.js";
export * from "./lease/index.js";
export * from "./egress/index.js";
export * from "./redact/index.js";
export * from "./plugin/index.js";
export * from "./duplex/index.js";
