import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { Readable } from "node:stream";
import { shellQuote } from "../exec/quote.js";
import type { ScriptRunner } from "../transport.js";

export interface LengthFramedStdinOptions {
  /** Host directory where a stream of unknown length is spooled to learn its size (default os.tmpdir()). */
  spoolDir?: string;
}

/**
 * For transports that cannot half-close stdin (a WebSocket exec without v5 `close`): the script reads
 * exactly N bytes through `head -c N`, so it sees EOF though the channel stays open. N must be known
 * before the call: a stream of unknown length is first spooled to a private host file.
 */
export function withLengthFramedStdin(inner: ScriptRunner, opts: LengthFramedStdinOptions = {}): ScriptRunner {
  return {
    // EOF, but only for stdin known in full before the call: no live byte pipe (so no duplex channels).
    capabilities: Object.freeze({ ...inner.capabilities, stdin: "buffered" as const, stdinEof: true }),
    // A PTY is its own byte pipe (it never half-closes): the inner transport's serves as is.
    ...(inner.pty ? { pty: inner.pty } : {}),
    async run(script, io) {
      const input = io.stdin;
      const framed = (length: number) => `head -c ${length} | /bin/sh -c ${shellQuote(script)}`;
      if (input === undefined || input === null) return inner.run(`/bin/sh -c ${shellQuote(script)} </dev/null`, { ...io, stdin: null });
      if (typeof input === "string" || Buffer.isBuffer(input)) {
        const bytes = typeof input === "string" ? Buffer.from(input, "utf8") : input;
        return inner.run(framed(bytes.length), { ...io, stdin: bytes });
      }
      const dir = await fsp.mkdtemp(path.join(opts.spoolDir ?? os.tmpdir(), "paperclip-stdin-")); // 0700
      try {
        const file = path.join(dir, "stdin");
        await pipeline(input as Readable, fs.createWriteStream(file, { mode: 0o600 }));
        const { size } = await fsp.stat(file);
        return await inner.run(framed(size), { ...io, stdin: fs.createReadStream(file) });
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    },
  };
}
