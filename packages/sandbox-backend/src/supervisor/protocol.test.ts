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
    expect(() => decode(Buffer.from([9, 0, 0, 0, 0]))).toThrow(/unexpected frame type 9/);
    const hugeData = Buffer.from([FRAME_STDOUT, 0xff, 0xff, 0xff, 0xff]);
    expect(() => createFrameDecoder(() => undefined)(hugeData)).toThrow(/data frame too large/);
    const huge = Buffer.from([FRAME_CONTROL, 0xff, 0xff, 0xff, 0xff]);
    expect(() => createFrameDecoder(() => undefined)(huge)).toThrow(/too large/);
  });

  it("holds each stream to its own caps and frame types, checked from the header", () => {
    const replies = createFrameDecoder(() => undefined, { maxControlBytes: 100, maxDataBytes: 1000, types: new Set([FRAME_CONTROL, FRAME_STDOUT]) });
    expect(() => replies(Buffer.from([FRAME_CONTROL, 0, 0, 0, 101]))).toThrow(/control frame too large \(101 bytes, cap 100\)/);
    const data = createFrameDecoder(() => undefined, { maxDataBytes: 1000 });
    expect(() => data(Buffer.from([FRAME_STDOUT, 0, 0, 0x03, 0xe9]))).toThrow(/data frame too large \(1001 bytes, cap 1000\)/);
    const noStdin = createFrameDecoder(() => undefined, { types: new Set([FRAME_CONTROL, FRAME_STDOUT]) });
    expect(() => noStdin(encodeFrame(2, Buffer.from("x")))).toThrow(/unexpected frame type 2/);
  });
});
