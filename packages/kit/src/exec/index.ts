export { shellQuote } from "./quote.js";
export { buildExecScript, EXIT_CWD_MISSING, EXIT_STDIN_STAGING_FAILED } from "./script.js";
export type { ExecRequest, ExecScriptOptions } from "./script.js";
export { executeCommand, DEFAULT_MAX_OUTPUT_BYTES, MAX_LOG_CHUNK_CHARS } from "./execute.js";
export type { ExecuteOptions, OutputStream, TruncationNote } from "./execute.js";
// Local-only: these act on this machine's processes (/proc), never on a remote sandbox.
export { createLocalScriptRunner } from "./local/local-runner.js";
export type { LocalScriptRunnerOptions } from "./local/local-runner.js";
export { killProcessGroup, processGroupAlive, ProcessGroupSet } from "./local/process-group.js";
export { findMarkedProcesses, endMarkedProcesses } from "./local/process-marker.js";
export { readProcStat, isZombieOrGone, type ProcStat } from "./local/proc-stat.js";
