/**
 * Host side of the supervisor wire format: the same module the in-jail supervisor uses (one copy of
 * the frame constants, encoder and bounded decoder). See in-jail/frames.mts and in-jail/main.mts.
 */
export {
  FRAME_CONTROL,
  FRAME_STDERR,
  FRAME_STDIN,
  FRAME_STDOUT,
  FrameError,
  type FrameLimits,
  createFrameDecoder,
  encodeControl,
  encodeFrame,
  parseControl,
} from "./in-jail/frames.mjs";
