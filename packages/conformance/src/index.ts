export * from "./runner.js";
export { describeConformance } from "./describe-conformance.js";
export { HOSTILE_ARGUMENTS } from "./cases/execute.js";
export { hostFor, configAfterAcquire, type HostForOptions, type HostIdentity, type InProcessHost } from "./host-for.js";
export { cliSkipReason } from "./cli-node.js";
export { startSetupSession, type SetupSessionOptions, type StartedSetupSession } from "./setup-session.js";
export { useCommandChannelSwitch, COMMAND_CHANNEL_SWITCH_VARIABLE, type CommandChannelSwitch } from "./channel-switch.js";
