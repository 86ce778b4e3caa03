export {
  withCommandChannel,
  closeCommandChannel,
  closeAllCommandChannels,
  commandChannelStatus,
  probeCommandChannel,
  settledCommandChannel,
  setCommandChannelLog,
  canCarryCommandChannel,
  commandChannelCarriesSync,
  COMMAND_CHANNEL_SWITCH,
  SYNC_CHANNEL_SWITCH,
  type CommandChannelOptions,
  type CommandChannelStatus,
} from "./runner.js";
export { CommandChannelLostError, CommandNotStartedError, ChannelUnavailableError } from "./session.js";
export type { ChannelImplementation } from "./bootstrap.js";
