import { Writable } from "node:stream";
import type { ScriptIo } from "../transport.js";

/** A script's stdout/stderr target (`ScriptIo["stdout"]`) as one interface for a runner to feed. */
export interface ScriptSink {
  /**
   * Delivers a chunk (empty ones are dropped). For a Writable that asked to wait, the promise
   * resolves once it drained, closed or failed: a runner that can pause its source awaits it.
   * A failed Writable receives nothing more; its error stays with its owner.
   */
  write(chunk: Buffer): void | Promise<void>;
  /** Ends a Writable and waits for it to finish, close or fail (as `pipe()` does at EOF). */
  end(): Promise<void>;
}

export function scriptSink(target: ScriptIo["stdout"]): ScriptSink {
  if (typeof target === "function") {
    return {
      write: (chunk) => {
        if (chunk.length > 0) target(chunk);
      },
      end: async () => undefined,
    };
  }
  if (!(target instanceof Writable)) return { write: () => undefined, end: async () => undefined };
  let failed = false;
  target.once("error", () => (failed = true));
  // One wait shared by every write until the drain: a caller that cannot pause (a log callback)
  // may keep writing, and must not stack a listener per chunk.
  let draining: Promise<void> | undefined;
  return {
    write(chunk) {
      if (failed || chunk.length === 0 || target.write(chunk)) return draining;
      draining ??= settled(target, "drain").then(() => {
        draining = undefined;
      });
      return draining;
    },
    async end() {
      if (failed || target.writableFinished) return;
      const done = settled(target, "finish");
      if (!target.writableEnded) target.end();
      await done;
    },
  };
}

/** Resolves on `event`, or once the stream closes or fails (whichever comes first). */
function settled(stream: Writable, event: "drain" | "finish"): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off(event, done);
      stream.off("close", done);
      stream.off("error", done);
      resolve();
    };
    stream.once(event, done);
    stream.once("close", done);
    stream.once("error", done);
  });
}
