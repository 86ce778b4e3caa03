// The Kubernetes exec "channel" protocols (v4/v5.channel.k8s.io) as a runner: pods/exec, and any
// server that speaks the same WebSocket framing.
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
