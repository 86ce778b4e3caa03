export { createBufferedRunner, type BufferedExecRequest, type BufferedExecResponse, type BufferedRunnerOptions } from "./buffered-runner.js";
export { createFileStdioRunner, type CombinedExecRequest, type CombinedExecResponse, type FileStdioRunnerOptions } from "./file-stdio-runner.js";
export { muxScript, demuxOutput, MuxFormatError, type MuxOptions } from "./stdio-mux.js";
export { runSpawnedScript, DRAIN_AFTER_EXIT_MS, type SpawnedScriptOptions } from "./spawn-process.js";
export { exitMarkerLine } from "./exit-marker.js";
export { withRemoteGroupKill, type RemoteGroupKillOptions } from "./remote-group-kill.js";
export { withInlineEnv, envPrologue } from "./inline-env.js";
export { withLengthFramedStdin, type LengthFramedStdinOptions } from "./length-framed-stdin.js";
export { collectStdin, TransportLimitError } from "./collect.js";
export { scriptSink, type ScriptSink } from "./script-sink.js";
export {
  createChannelExecRunner,
  exitCodeFromStatus,
  ChannelExecError,
  CHANNEL_EXEC_CAPABILITIES,
  CHANNEL_PROTOCOL_V4,
  CHANNEL_PROTOCOL_V5,
  CHANNEL_STDIN,
  CHANNEL_STDOUT,
  CHANNEL_STDERR,
  CHANNEL_STATUS,
  CHANNEL_CLOSE,
  type ChannelSocket,
  type ChannelConnectRequest,
  type ChannelProtocolMemory,
  type ChannelExecRunnerOptions,
} from "./channel-exec-runner.js";
export * from "./command-channel/index.js";
