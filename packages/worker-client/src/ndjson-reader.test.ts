import { describe, expect, it } from "vitest";
import { NdjsonLineSplitter } from "./ndjson-reader.js";

describe("NdjsonLineSplitter", () => {
  it("joins partial lines and splits several lines in one chunk", () => {
    const lines: string[] = [];
    const splitter = new NdjsonLineSplitter((line) => lines.push(line));
    splitter.push('{"a":');
    splitter.push('1}\n{"b":2}\n{"c"');
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
    splitter.push(":3}\r\n\n");
    expect(lines).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
  });

  it("decodes a multi-byte character split across chunks", () => {
    const lines: string[] = [];
    const splitter = new NdjsonLineSplitter((line) => lines.push(line));
    const bytes = Buffer.from("€\n");
    splitter.push(bytes.subarray(0, 1));
    splitter.push(bytes.subarray(1));
    expect(lines).toEqual(["€"]);
  });

  it("emits a final line without a trailing newline at end()", () => {
    const lines: string[] = [];
    const splitter = new NdjsonLineSplitter((line) => lines.push(line));
    splitter.push("last");
    splitter.end();
    expect(lines).toEqual(["last"]);
  });
});
