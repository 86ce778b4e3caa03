// A transport whose streams can be cut like a dropped connection, for the command channel's fault tests.
import { PassThrough, Readable } from "node:stream";
import type { ScriptExit, ScriptIo, ScriptRunner } from "../../../transport.js";

/**
 * A transport whose streams can be cut like a dropped connection: the run rejects at once, the
 * sandbox side sees its stdin end, and only an abort (the vendor's second exec) ends it there.
 */
export function cuttable(inner: ScriptRunner) {
  const cuts = new Set<() => void>();
  const outputs = new Set<(chunk: Buffer) => void>();
  const holds = new Set<() => void>();
  return {
    runner: {
      capabilities: inner.capabilities,
      run(script: string, io: ScriptIo): Promise<ScriptExit> {
        return new Promise<ScriptExit>((resolve, reject) => {
          const forward = new PassThrough();
          const source = io.stdin;
          let live = true;
          let held = false;
          const hold = () => (held = true);
          if (source instanceof Readable) {
            source.on("data", (chunk: Buffer) => {
              if (live && !held) forward.write(chunk);
            });
            source.on("end", () => live && forward.end());
          } else if (source !== undefined && source !== null) forward.end(source);
          else forward.end();
          const stdout = (chunk: Buffer) => live && deliver(io.stdout, chunk);
          const cut = () => {
            live = false;
            forward.end();
            reject(new Error("connection lost"));
          };
          cuts.add(cut);
          outputs.add(stdout);
          holds.add(hold);
          inner
            .run(script, { ...io, stdin: forward, stdout, stderr: (c) => live && deliver(io.stderr, c) })
            .then(resolve, reject)
            .finally(() => {
              cuts.delete(cut);
              outputs.delete(stdout);
              holds.delete(hold);
            });
        });
      },
    } satisfies ScriptRunner,
    cutAll: () => [...cuts].forEach((cut) => cut()),
    /** The streams open now stop carrying input (a hung connection); later runs are not held. */
    holdInput: () => [...holds].forEach((hold) => hold()),
    inject: (text: string) => [...outputs].forEach((out) => out(Buffer.from(text))),
  };
}

function deliver(target: ScriptIo["stdout"], chunk: Buffer): void {
  if (typeof target === "function") target(chunk);
  else target?.write(chunk);
}
