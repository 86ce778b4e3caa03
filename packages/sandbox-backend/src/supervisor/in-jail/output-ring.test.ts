import { describe, expect, it } from "vitest";
import { OutputRing } from "./output-ring.mjs";

const bytes = (from: number, count: number) => Buffer.from(Array.from({ length: count }, (_, i) => (from + i) % 251));

describe("OutputRing", () => {
  it("addresses bytes by absolute offset and reads from any kept offset", () => {
    const ring = new OutputRing(1024);
    ring.append(Buffer.from("hello "));
    ring.append(Buffer.from("world"));
    expect(ring.read(0, 100)).toEqual({ start: 0, data: Buffer.from("hello world") });
    expect(ring.read(6, 3)).toEqual({ start: 6, data: Buffer.from("wor") });
    expect(ring.read(11, 10)).toEqual({ start: 11, data: Buffer.alloc(0) });
    expect([ring.start, ring.end]).toEqual([0, 11]);
  });

  it("keeps at most its capacity, dropping the oldest bytes, across wrap-around and growth", () => {
    const ring = new OutputRing(10_000);
    let written = 0;
    for (const size of [1, 4095, 3000, 7, 5000, 9999, 10_000, 12_345, 3]) {
      ring.append(bytes(written, size));
      written += size;
      expect(ring.end).toBe(written);
      expect(ring.size).toBe(Math.min(written, 10_000));
      expect(ring.allocated).toBeLessThanOrEqual(10_000);
      // Every kept byte is the byte written at that offset.
      const { start, data } = ring.read(0, 20_000);
      expect(start).toBe(written - ring.size);
      expect(data).toEqual(bytes(start, ring.size));
    }
  });

  it("reports where the data starts when the asked offset was dropped", () => {
    const ring = new OutputRing(8);
    ring.append(Buffer.from("0123456789abcdef"));
    expect(ring.read(2, 100)).toEqual({ start: 8, data: Buffer.from("89abcdef") });
  });

  it("takes nothing once closed", () => {
    const ring = new OutputRing(8);
    ring.append(Buffer.from("ab"));
    ring.close();
    ring.append(Buffer.from("cd"));
    expect(ring.read(0, 10).data.toString()).toBe("ab");
    expect(ring.ended).toBe(true);
  });
});
