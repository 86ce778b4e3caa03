import { Writable, type Readable } from "node:stream";
import type { ScriptIo } from "../transport.js";

export interface StreamDelivery {
  /** Resolves when every byte reached the sink (and a Writable sink finished). */
  done: Promise<void>;
  ended(): boolean;
  /** True while data is buffered or the sink asked us to wait; such a stream is not idle. */
  busy(): boolean;
  lastActivity: number;
  /** Stops reading (a background child keeps the pipe open) and ends the sink. */
  cut(): void;
}

/** Rewrites chunks on their way to the sink (e.g. strips an in-band exit marker). */
export interface ChunkFilter {
  push(chunk: Buffer): Buffer;
  /** Bytes held back at the end of the stream. */
  flush(): Buffer;
}

/**
 * Delivers a child stream to a sink. A Writable sink gets back-pressure and is ended at EOF (as
 * `pipe()` does); if it fails it stops receiving data and its error stays with its owner.
 */
export function deliverStream(source: Readable, sink: ScriptIo["stdout"], filter?: ChunkFilter): StreamDelivery {
  let ended = false;
  let sinkFailed = false;
  const writable = sink instanceof Writable ? sink : undefined;
  const delivery: StreamDelivery = {
    done: Promise.resolve(),
    ended: () => ended,
    busy: () => source.readableLength > 0 || (writable !== undefined && !sinkFailed && writable.writableNeedDrain),
    lastActivity: Date.now(),
    cut: () => {
      source.destroy();
      if (writable && !sinkFailed) writable.end();
    },
  };
  const write = (chunk: Buffer) => {
    if (chunk.length === 0) return;
    if (typeof sink === "function") sink(chunk);
    else if (writable && !sinkFailed && !writable.write(chunk)) {
      source.pause();
      writable.once("drain", () => source.resume());
    }
  };
  let flushed = false;
  const flush = () => {
    if (flushed || !filter) return;
    flushed = true;
    write(filter.flush());
  };
  const sourceDone = new Promise<void>((resolve) => {
    source.once("end", () => {
      ended = true;
      flush();
      resolve();
    });
    source.once("close", () => {
      flush();
      resolve();
    });
  });
  source.on("data", (raw: Buffer) => {
    delivery.lastActivity = Date.now();
    write(filter ? filter.push(raw) : raw);
  });
  if (writable) {
    writable.once("error", () => {
      sinkFailed = true;
      source.resume();
    });
    delivery.done = sourceDone.then(() => {
      if (sinkFailed || writable.writableFinished) return;
      return new Promise<void>((resolve) => {
        writable.once("finish", resolve);
        writable.once("close", resolve);
        writable.once("error", () => resolve());
        if (!writable.writableEnded) writable.end();
      });
    });
  } else {
    delivery.done = sourceDone;
  }
  return delivery;
}

/**
 * After the script exits, waits for its output. A stream that has not ended, holds no buffered data
 * and has been silent for `idleMs` is held open by a background child: stop reading it.
 */
export async function settleAfterExit(outputs: StreamDelivery[], idleMs: number): Promise<void> {
  const allDone = Promise.all(outputs.map((o) => o.done));
  let finished = false;
  void allDone.then(() => (finished = true));
  const idle = () => {
    const open = outputs.filter((o) => !o.ended());
    const now = Date.now();
    return !finished && open.length > 0 && open.every((o) => !o.busy() && now - o.lastActivity >= idleMs) ? open : undefined;
  };
  while (!finished) {
    await Promise.race([allDone, sleepMs(20)]);
    if (!idle()) continue;
    // A process starved of CPU wakes up in the timers phase with output still unread in its pipes:
    // let an I/O poll read it before calling the stream silent.
    await new Promise((resolve) => setImmediate(resolve));
    const open = idle();
    if (open) {
      for (const o of open) o.cut();
      break;
    }
  }
  await allDone;
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
