// A live read of the entrypoint's output that the sandbox's end cuts short: the jail is destroyed
// once the output is kept in memory, and the reader must get the rest from what was kept. Under
// load the live read lost the whole of stdout (3 of 40 sandboxes, before this was handled).
import { describe, expect, it } from "vitest";
import type { GrpcCall } from "@paperclip-sandbox/emulator-kit";
import { stdioReadV2 } from "./entrypoint-stdio.js";
import { CapturedProcess, KILLED, type EmulatedProcess } from "./process.js";
import type { SandboxRecord } from "./sandboxes.js";

/** A live process whose read sends `delivered` and then ends without reaching the stream's end. */
function cutShort(record: { entrypoint: EmulatedProcess | undefined }, delivered: string, kept: CapturedProcess): EmulatedProcess {
  return {
    execId: "entrypoint",
    writeStdin: async () => undefined,
    stdinStatus: () => ({ written: 0, closed: true }),
    exit: Promise.resolve(KILLED),
    exited: () => null,
    kill: () => undefined,
    async read(_stream, offset, send) {
      if (delivered.length > offset) send(Buffer.from(delivered.slice(offset)));
      record.entrypoint = kept; // the sandbox finished: its output was captured, then the jail went
    },
  };
}

function callInto(chunks: Array<{ data: string; at: number }>): GrpcCall {
  return { signal: new AbortController().signal, write: (m: { data: Buffer; starting_offset: number }) => void chunks.push({ data: m.data.toString(), at: m.starting_offset }) } as unknown as GrpcCall;
}

describe("SandboxStdioReadV2 across the sandbox's end", () => {
  it("reads the rest from the kept output when the jail's end cuts the live read short", async () => {
    const kept = new CapturedProcess("entrypoint", { base: 0, data: Buffer.from("got:v2\nmore\n") }, { base: 0, data: Buffer.alloc(0) }, { code: 3 });
    const record = { entrypoint: undefined as EmulatedProcess | undefined };
    record.entrypoint = cutShort(record, "got:", kept);
    const chunks: Array<{ data: string; at: number }> = [];
    await stdioReadV2(record as SandboxRecord, { offset: 0, file_descriptor: 0 }, callInto(chunks));
    expect(chunks).toEqual([
      { data: "got:", at: 0 },
      { data: "v2\nmore\n", at: 4 },
    ]);
  });

  it("sends each byte once when the live read had already delivered everything", async () => {
    const kept = new CapturedProcess("entrypoint", { base: 0, data: Buffer.from("all\n") }, { base: 0, data: Buffer.alloc(0) }, { code: 0 });
    const record = { entrypoint: undefined as EmulatedProcess | undefined };
    record.entrypoint = cutShort(record, "all\n", kept);
    const chunks: Array<{ data: string; at: number }> = [];
    await stdioReadV2(record as SandboxRecord, { offset: 0, file_descriptor: 0 }, callInto(chunks));
    expect(chunks).toEqual([{ data: "all\n", at: 0 }]);
  });
});
