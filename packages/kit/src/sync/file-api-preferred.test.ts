import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { STREAM_TRANSPORT, type FileTransport, type ScriptRunner } from "../transport.js";
import { preferFileApiSync } from "./file-api-preferred.js";
import { syncFor } from "./sync-for.js";

const runner: ScriptRunner = { capabilities: STREAM_TRANSPORT, run: async () => ({ exitCode: 0, signal: null, aborted: false }) };
const files: FileTransport = { upload: async () => undefined, download: async () => Readable.from([]) };

describe("preferFileApiSync", () => {
  it("makes syncFor use the file API for a runner that could stream", () => {
    expect(syncFor(runner, files).kind).toBe("stream");
    expect(syncFor(preferFileApiSync(runner), files).kind).toBe("file-api");
  });
  it("is the same runner otherwise: every other capability kept, runs passed through", async () => {
    const preferred = preferFileApiSync(runner);
    expect({ ...preferred.capabilities, stdinEof: true }).toEqual(STREAM_TRANSPORT);
    expect(await preferred.run("true", {})).toEqual({ exitCode: 0, signal: null, aborted: false });
  });
});
