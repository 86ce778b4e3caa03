import type { Readable } from "node:stream";
import type { ScriptIo } from "../transport.js";
import { scriptSink } from "./script-sink.js";

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
 * Delivers a child stream to a sink through `scriptSink` (the one sink every runner uses): a
 * Writable gets back-pressure (the child's stream pauses while it asks to wait) and is ended at
 * EOF; one that fails stops receiving data and its error stays with its owner.
 */
export function deliverStream(source: Readable, target: ScriptIo["stdout"], filter?: ChunkFilter): StreamDelivery {
  const sink = scriptSink(target);
  let ended = false;
  let waiting = false;
  const delivery: StreamDelivery = {
    done: Promise.resolve(),
    ended: () => ended,
    busy: () => source.readableLength > 0 || waiting,
    lastActivity: Date.now(),
    cut: () => {
      source.destroy();
      void sink.end();
    },
  };
  const write = (chunk: Buffer) => {
    const wait = sink.write(chunk);
    if (!wait) return;
    waiting = true;
    source.pause();
    void wait.then(() => {
      waiting = false;
      source.resume();
    });
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
  delivery.done = sourceDone.then(() => sink.end());
  return delivery;
}

/**
 * After the script exits, waits for its output. A stream that has not ended, holds no buffered data
 * and has been silent for `idleMs` (a number, or read again at each look) is held open by a
 * background child: stop reading it.
 */
export async function settleAfterExit(outputs: StreamDelivery[], idleMs: number | (() => number)): Promise<void> {
  const allDone = Promise.all(outputs.map((o) => o.done));
  let finished = false;
  void allDone.then(() => (finished = true));
  const idle = () => {
    const open = outputs.filter((o) => !o.ended());
    const now = Date.now();
    const silence = typeof idleMs === "function" ? idleMs() : idleMs;
    return !finished && open.length > 0 && open.every((o) => !o.busy() && now - o.lastActivity >= silence) ? open : undefined;
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
