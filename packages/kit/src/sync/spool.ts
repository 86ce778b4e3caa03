import fs from "node:fs";
import { Writable } from "node:stream";
import type { ArchiveInspector } from "./archive-inspect.js";

/**
 * A stdout sink that writes an outbound archive to a host file with backpressure (memory stays
 * bounded) and counts bytes; past `limitBytes` it stops writing and calls `onLimit` once, which the
 * caller uses to abort the sandbox script.
 */
export class ArchiveSpool extends Writable {
  readonly #file: fs.WriteStream;
  readonly #limitBytes: number;
  readonly #onLimit: () => void;
  #bytes = 0;
  #overLimit = false;
  #fileError: Error | undefined;

  readonly #inspector: ArchiveInspector | undefined;

  /** With an `inspector`, every byte spooled is also inspected as it passes (no second read). */
  constructor(filePath: string, limitBytes: number, onLimit: () => void, inspector?: ArchiveInspector) {
    // "wx": never follow or reuse something already at that path; 0600 before any byte lands.
    // Up to 1 MiB buffered towards the file: writes overlap with the runner's reads, memory stays flat.
    super({ highWaterMark: 256 * 1024 });
    this.#file = fs.createWriteStream(filePath, { flags: "wx", mode: 0o600, highWaterMark: 1024 * 1024 });
    this.#file.on("error", (error) => {
      this.#fileError ??= error;
      this.#releaseWaiter();
    });
    this.#file.on("drain", () => this.#releaseWaiter());
    this.#file.on("close", () => this.#releaseWaiter());
    this.#limitBytes = limitBytes;
    this.#onLimit = onLimit;
    this.#inspector = inspector;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get overLimit(): boolean {
    return this.#overLimit;
  }

  get fileError(): Error | undefined {
    return this.#fileError;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#bytes += chunk.length;
    if (this.#overLimit || this.#fileError !== undefined) return callback();
    if (this.#bytes > this.#limitBytes) {
      this.#overLimit = true;
      this.#onLimit();
      return callback();
    }
    this.#inspector?.write(chunk);
    // Errors are recorded (not passed on) so a runner piping into us never sees a stream error.
    if (this.#file.write(chunk)) return callback();
    this.#waiter = callback;
  }

  #waiter: ((error?: Error | null) => void) | undefined;
  #releaseWaiter(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#closeFile().then(() => callback(), () => callback());
  }

  /** Flush and close the file, whether or not the runner ended this stream. */
  async finish(): Promise<void> {
    if (!this.writableEnded) this.end();
    if (!this.writableFinished) {
      await new Promise<void>((resolve) => {
        this.once("finish", resolve);
        this.once("error", () => resolve());
      });
    }
    await this.#closeFile();
  }

  /** Close the file without waiting for pending data (failure paths). */
  abandon(): void {
    this.destroy();
    this.#file.destroy();
  }

  #closePromise: Promise<void> | undefined;
  #closeFile(): Promise<void> {
    this.#closePromise ??= new Promise<void>((resolve) => {
      if (this.#file.closed) return resolve();
      this.#file.once("close", () => resolve());
      this.#file.end();
    });
    return this.#closePromise;
  }
}
