export { createDuplexChannels, DuplexChannelError } from "./duplex-channels.js";
export type { DuplexChannels, DuplexChannelsOptions, DuplexLeaseScope } from "./duplex-channels.js";
