import { PassThrough, Writable, type Readable } from "node:stream";
import { shellQuote as quote } from "../exec/quote.js";
import type { FileTransport, ScriptRunner } from "../transport.js";

/**
 * A `FileTransport` over the runner's own byte streams: `cat >` in, `cat` out. For a runner whose
 * commands cost no vendor call (a ready command channel), where the vendor's file API costs one.
 * Needs a binary-safe runner with streamed stdin and EOF. An upload cut short removes its partial
 * file (a trap, also on the TERM a lost channel's recovery sends); a download's bytes are counted
 * by the caller against the size it expects.
 */
export function runnerFileTransport(runner: () => ScriptRunner): FileTransport {
  return {
    async upload(path, source, opts = {}) {
      const target = quote(path);
      const mode = opts.mode !== undefined ? `chmod ${(opts.mode & 0o7777).toString(8)} -- ${target} || exit 1\n` : "";
      const script = `trap 'rm -f -- ${target}' EXIT\ntrap 'exit 143' HUP INT TERM\n(umask 077 && cat > ${target}) || exit 1\n${mode}trap - EXIT HUP INT TERM\n`;
      const stderr: Buffer[] = [];
      const exit = await runner().run(script, { stdin: source, stderr: (chunk) => stderr.push(chunk), ...(opts.signal ? { signal: opts.signal } : {}) });
      if (exit.exitCode !== 0) throw new Error(`writing ${path} in the sandbox ended with ${exit.exitCode ?? exit.signal ?? exit.reason}: ${Buffer.concat(stderr).toString("utf8").slice(0, 500)}`);
    },
    async download(path, opts = {}) {
      const out = new PassThrough();
      // Forwards with back-pressure, and leaves `out` open: only a clean exit ends it. A reader
      // that went away (out destroyed) releases the command's output instead of holding it.
      let waiting: (() => void) | undefined;
      out.once("close", () => waiting?.());
      const forward = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          if (out.destroyed || out.write(chunk)) return callback();
          waiting = () => {
            waiting = undefined;
            callback();
          };
          out.once("drain", () => waiting?.());
        },
      });
      const stderr: Buffer[] = [];
      runner()
        .run(`exec cat -- ${quote(path)}\n`, { stdout: forward, stderr: (chunk) => stderr.push(chunk), ...(opts.signal ? { signal: opts.signal } : {}) })
        .then(
          (exit) => {
            if (exit.exitCode === 0) out.end();
            else out.destroy(new Error(`reading ${path} in the sandbox ended with ${exit.exitCode ?? exit.signal ?? exit.reason}: ${Buffer.concat(stderr).toString("utf8").slice(0, 500)}`));
          },
          (error: Error) => out.destroy(error),
        );
      return out as Readable;
    },
  };
}
