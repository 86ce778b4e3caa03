import { describe, expect, it } from "vitest";
import { FRAME_CONTROL, FRAME_STDOUT, createFrameDecoder, encodeControl, encodeFrame } from "./protocol.js";

describe("frame decoder", () => {
  const frames = Buffer.concat([
    encodeControl({ op: "started", id: "a" }),
    encodeFrame(FRAME_STDOUT, Buffer.from("hello ")),
    encodeFrame(FRAME_STDOUT, Buffer.alloc(0)),
    encodeFrame(FRAME_STDOUT, Buffer.alloc(70_000, 0x62)),
    encodeControl({ op: "exit", code: 0 }),
  ]);

  const decodeIn = (pieces: Buffer[]) => {
    const seen: Array<[number, string]> = [];
    const decode = createFrameDecoder((type, payload) => seen.push([type, payload.toString()]));
    for (const piece of pieces) decode(piece);
    return seen;
  };

  it("yields the same frames however the stream is split", () => {
    const whole = decodeIn([frames]);
    expect(whole.map(([type]) => type)).toEqual([FRAME_CONTROL, FRAME_STDOUT, FRAME_STDOUT, FRAME_STDOUT, FRAME_CONTROL]);
    expect(JSON.parse(whole[4]![1])).toEqual({ op: "exit", code: 0 });
    for (const size of [1, 3, 5, 7, 4096, 65_536]) {
      const pieces: Buffer[] = [];
      for (let offset = 0; offset < frames.length; offset += size) pieces.push(frames.subarray(offset, offset + size));
      expect(decodeIn(pieces)).toEqual(whole);
    }
  });

  it("rejects an unknown frame type and oversized control and data frames", () => {
    const decode = createFrameDecoder(() => undefined);
    expect(() => decode(Buffer.from([9, 0, 0, 0, 0]))).toThrow(/bad frame type/);
    const hugeData = Buffer.from([FRAME_STDOUT, 0xff, 0xff, 0xff, 0xff]);
    expect(() => createFrameDecoder(() => undefined)(hugeData)).toThrow(/data frame too large/);
    const huge = Buffer.from([FRAME_CONTROL, 0xff, 0xff, 0xff, 0xff]);
    expect(() => createFrameDecoder(() => undefined)(huge)).toThrow(/too large/);
  });
});
