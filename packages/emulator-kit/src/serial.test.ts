import { describe, expect, it } from "vitest";
import { createSerial } from "./serial.js";

describe("per-key serialisation", () => {
  it("runs one key's work in call order, other keys alongside, and a failure does not block the next", async () => {
    const serial = createSerial();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = serial("a", async () => {
      order.push("a1 start");
      await gate;
      order.push("a1 end");
      throw new Error("a1 failed");
    });
    const second = serial("a", () => order.push("a2"));
    const other = serial("b", () => order.push("b1"));
    await other;
    expect(order).toEqual(["a1 start", "b1"]);
    expect(serial.busy("a")).toBe(true);
    expect(serial.busy("b")).toBe(false);
    release();
    await expect(first).rejects.toThrow("a1 failed");
    await second;
    expect(order).toEqual(["a1 start", "b1", "a1 end", "a2"]);
    await serial.idle();
    expect(serial.busy("a")).toBe(false);
  });
});
