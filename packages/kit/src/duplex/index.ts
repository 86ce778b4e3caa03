export { createDuplexChannels, DuplexChannelError, MAX_DATA_NOTIFICATION_BYTES } from "./duplex-channels.js";
export type { DuplexChannels, DuplexChannelsOptions, DuplexLeaseScope } from "./duplex-channels.js";
