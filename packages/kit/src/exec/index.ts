export { shellQuote } from "./quote.js";
export { buildExecScript, EXIT_CWD_MISSING, EXIT_STDIN_STAGING_FAILED } from "./script.js";
export type { ExecRequest, ExecScriptOptions } from "./script.js";
export { executeCommand, DEFAULT_MAX_OUTPUT_BYTES } from "./execute.js";
export type { ExecuteOptions, OutputStream, TruncationNote } from "./execute.js";
export { createLocalScriptRunner } from "./local-runner.js";
export type { LocalScriptRunnerOptions } from "./local-runner.js";
export { killProcessGroup, processGroupAlive, ProcessGroupSet } from "./process-group.js";
export { findMarkedProcesses, endMarkedProcesses } from "./process-marker.js";
