/**
 * Keeps the last `maxBytes` bytes written to it: sandbox stderr can be unbounded, and the end of it
 * is what explains a failure. Memory stays under about twice `maxBytes`.
 */
export class BoundedTail {
  readonly #maxBytes: number;
  #chunks: Buffer[] = [];
  #held = 0;
  #dropped = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = Math.max(0, Math.floor(maxBytes));
  }

  readonly push = (chunk: Buffer): void => {
    if (this.#maxBytes === 0) {
      this.#dropped += chunk.length;
      return;
    }
    this.#chunks.push(chunk);
    this.#held += chunk.length;
    if (this.#held > this.#maxBytes * 2) this.#compact();
  };

  /** Bytes seen but no longer held. */
  get droppedBytes(): number {
    return this.#dropped + Math.max(0, this.#held - this.#maxBytes);
  }

  text(): string {
    this.#compact();
    return Buffer.concat(this.#chunks).toString("utf8");
  }

  #compact(): void {
    const all = Buffer.concat(this.#chunks);
    const keep = all.subarray(Math.max(0, all.length - this.#maxBytes));
    this.#dropped += all.length - keep.length;
    this.#chunks = [keep];
    this.#held = keep.length;
  }
}
