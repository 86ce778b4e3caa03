import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator } from "../example/echo.js";
import { buildMultipart } from "./build.js";
import { parseHeaderParams } from "./headers.js";
import { MultipartError, parseMultipart, readMultipart } from "./parse.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");
/** Feeds bytes in chunks of `size`, so delimiters straddle chunk edges. */
const chunked = (data: Buffer, size: number) =>
  Readable.from(
    (function* () {
      for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
    })(),
  );

describe("multipart", () => {
  it("round-trips binary files through the emulator: undici FormData in, kit-built multipart out", async () => {
    emulator = await runEmulator(echoEmulator);
    // Bytes that look like delimiters and line ends, plus every byte value.
    const tricky = Buffer.concat([Buffer.from("\r\n--\r\n------WebKitFormBoundary\r\n\r\n"), Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(300_000)]);
    const form = new FormData();
    form.append("file", new Blob([tricky]), "/home/user/dir/data.bin");
    form.append("file", new Blob([Buffer.alloc(0)]), "/tmp/empty");
    form.append("path", "/tmp/ünïcode ✓.txt");
    const response = await fetch(`${emulator.url}/files`, { method: "POST", headers: { "x-api-key": emulator.credentials.apiKey! }, body: form });
    expect(response.status).toBe(200);
    const type = response.headers.get("content-type")!;
    const parts = await readMultipart(Readable.from([Buffer.from(await response.arrayBuffer())]), parseHeaderParams(type).params.boundary!);
    expect(parts.map((p) => [p.name, p.filename])).toEqual([
      ["file", "/home/user/dir/data.bin"], // full path kept, as E2B's envd expects
      ["file", "/tmp/empty"],
      ["path", undefined],
    ]);
    expect(parts[0]!.data.equals(tricky)).toBe(true);
    expect(parts[0]!.headers["x-sha256"]).toBe(sha(tricky));
    expect(parts[1]!.data.length).toBe(0);
    expect(parts[2]!.data.toString()).toBe("/tmp/ünïcode ✓.txt");

    // The client's own parser reads the kit's output too.
    const again = new FormData();
    again.append("file", new Blob([tricky]), "a.bin");
    const reply = await fetch(`${emulator.url}/files`, { method: "POST", headers: { "x-api-key": emulator.credentials.apiKey! }, body: again });
    const parsed = await reply.formData();
    const file = parsed.get("file") as File;
    expect(file.name).toBe("a.bin");
    expect(Buffer.from(await file.arrayBuffer()).equals(tricky)).toBe(true);
  });

  it("parses the same body whatever the chunking (1, 7, 4096 bytes)", async () => {
    const built = buildMultipart([
      { name: "files[0].path", data: "/a" },
      { name: "files[0].file", filename: "a", data: Buffer.from("x\r\n--y") },
      { name: "f", filename: 'naïve "q".txt', data: "z" },
    ]);
    for (const size of [1, 7, 4096]) {
      const parts = await readMultipart(chunked(built.body, size), built.boundary);
      expect(parts.map((p) => [p.name, p.filename, p.data.toString()])).toEqual([
        ["files[0].path", undefined, "/a"],
        ["files[0].file", "a", "x\r\n--y"],
        ["f", 'naïve "q".txt', "z"], // filename* (RFC 5987) wins over the %22-escaped filename
      ]);
    }
  });

  it("streams part bodies, and skips the unread rest of a part", async () => {
    const big = randomBytes(2 * 1024 * 1024);
    const built = buildMultipart([
      { name: "skipped", filename: "s", data: big },
      { name: "read", filename: "r", data: big },
    ]);
    const seen: Array<[string, number]> = [];
    for await (const part of parseMultipart(chunked(built.body, 64 * 1024), built.boundary)) {
      if (part.name === "skipped") {
        seen.push([part.name, 0]);
        continue;
      }
      let total = 0;
      for await (const chunk of part.body) total += (chunk as Buffer).length;
      seen.push([part.name, total]);
    }
    expect(seen).toEqual([
      ["skipped", 0],
      ["read", big.length],
    ]);
  });

  it("enforces limits while streaming and rejects malformed bodies", async () => {
    const built = buildMultipart([
      { name: "a", data: Buffer.alloc(5000) },
      { name: "b", data: "x" },
    ]);
    await expect(readMultipart(chunked(built.body, 512), built.boundary, { maxPartBytes: 4096 })).rejects.toThrow(new MultipartError(413, "multipart part exceeds the 4096-byte limit"));
    await expect(readMultipart(chunked(built.body, 512), built.boundary, { maxParts: 1 })).rejects.toThrow("multipart body has more than 1 parts");
    await expect(readMultipart(chunked(built.body, 512), built.boundary, { maxTotalBytes: 1000 })).rejects.toThrow(/exceeds the 1000-byte limit/);
    const endless = Buffer.concat([Buffer.from(`--${built.boundary}\r\nX-Long: `), Buffer.alloc(20_000, 0x61)]);
    await expect(readMultipart(chunked(endless, 1000), built.boundary)).rejects.toThrow("multipart part headers exceed 16384 bytes");
    const truncated = built.body.subarray(0, built.body.length - 10);
    await expect(readMultipart(chunked(truncated, 100), built.boundary)).rejects.toThrow("multipart body ended before its closing delimiter");
  });

  it("answers 400 through the vendor envelope for a broken upload", async () => {
    emulator = await runEmulator(echoEmulator);
    const response = await fetch(`${emulator.url}/files`, {
      method: "POST",
      headers: { "x-api-key": emulator.credentials.apiKey!, "content-type": "multipart/form-data; boundary=zzz" },
      body: "--zzz\r\nContent-Disposition: form-data; name=a\r\n\r\nno end",
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ code: 400, message: "multipart body ended before its closing delimiter" });
  });
});
