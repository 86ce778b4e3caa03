/**
 * Host side of the supervisor wire format: the same module the in-jail supervisor uses (one copy of
 * the frame constants, encoder and bounded decoder). See in-jail/frames.mts and in-jail/main.mts.
 */
export {
  FRAME_CONTROL,
  FRAME_HEADER_BYTES,
  FRAME_STDERR,
  FRAME_STDIN,
  FRAME_STDOUT,
  FrameError,
  type FrameLimits,
  MAX_CONTROL_BYTES,
  MAX_DATA_BYTES,
  createFrameDecoder,
  encodeControl,
  encodeFrame,
  parseControl,
} from "./in-jail/frames.mjs";
