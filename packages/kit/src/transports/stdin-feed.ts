import type { Writable } from "node:stream";
import type { ScriptIo } from "../transport.js";

/** Writes `io.stdin` to a process's stdin and ends it; absent stdin is an immediate EOF. */
export function feedStdin(stdin: Writable, input: ScriptIo["stdin"]): void {
  stdin.on("error", () => {
    // EPIPE: the script exited without reading all of its stdin; that is its choice.
  });
  if (input === undefined || input === null) stdin.end();
  else if (typeof input === "string" || Buffer.isBuffer(input)) stdin.end(input);
  else input.pipe(stdin);
}
