// Stdin by offset, as the router's unary writes and client streams address it.
import { describe, expect, it } from "vitest";
import { StdinCursor } from "./process.js";

function cursor() {
  const received: string[] = [];
  let closed = 0;
  const stdin = new StdinCursor(
    async (data) => void received.push(data.toString()),
    async () => void (closed += 1),
  );
  return { stdin, received, closed: () => closed };
}

describe("StdinCursor", () => {
  it("applies writes in order and drops the part of a retried write it already has", async () => {
    const { stdin, received } = cursor();
    await stdin.write(0, Buffer.from("hello "), false);
    await stdin.write(0, Buffer.from("hello "), false); // the same write, retried
    await stdin.write(3, Buffer.from("lo world"), false); // overlaps the first
    expect(received).toEqual(["hello ", "world"]);
    expect(stdin.written).toBe(11);
  });

  it("refuses a write past the cursor (a lost write) with OUT_OF_RANGE", async () => {
    const { stdin, received } = cursor();
    await stdin.write(0, Buffer.from("ab"), false);
    await expect(stdin.write(5, Buffer.from("zz"), false)).rejects.toMatchObject({ code: 11 });
    expect(received).toEqual(["ab"]);
    await stdin.write(2, Buffer.from("cd"), false); // the stream goes on after the refusal
    expect(received).toEqual(["ab", "cd"]);
  });

  it("closes once at EOF; a repeated EOF is fine, new bytes after it are refused", async () => {
    const { stdin, closed } = cursor();
    await stdin.write(0, Buffer.from("x"), true);
    await stdin.write(1, Buffer.alloc(0), true);
    await stdin.write(0, Buffer.from("x"), true);
    expect(closed()).toBe(1);
    await expect(stdin.write(1, Buffer.from("y"), false)).rejects.toMatchObject({ code: 9 });
  });
});
