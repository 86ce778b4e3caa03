/**
 * One output stream of an exec, kept in a bounded ring addressed by absolute byte offsets: offset
 * N is the N-th byte the command wrote, whatever was dropped since. When the command outpaces the
 * bound, the oldest bytes go (readers learn where the kept bytes start) and the command is never
 * blocked, so a detached process nobody reads can log forever. Storage grows on demand up to the
 * bound, so a quiet command costs next to nothing.
 */
const EMPTY = Buffer.alloc(0);
const MIN_STORAGE = 4096;

export class OutputRing {
  private storage: Buffer = EMPTY;
  /** Index in `storage` of the byte at offset `start`. */
  private head = 0;
  /** Offset of the oldest byte kept. */
  start = 0;
  /** Offset just after the newest byte written. */
  end = 0;
  /** No more bytes will come (EOF, or the command finished and its output was closed). */
  ended = false;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity <= 0) throw new Error("ring capacity must be a positive integer");
  }

  get size(): number {
    return this.end - this.start;
  }

  /** Bytes currently allocated (for the supervisor's memory budget). */
  get allocated(): number {
    return this.storage.length;
  }

  append(chunk: Buffer): void {
    if (this.ended || chunk.length === 0) return;
    const endBefore = this.end;
    this.end += chunk.length;
    if (chunk.length >= this.capacity) {
      // Only the newest `capacity` bytes of this chunk survive; everything before is dropped.
      if (this.storage.length !== this.capacity) this.storage = Buffer.allocUnsafe(this.capacity);
      chunk.copy(this.storage, 0, chunk.length - this.capacity);
      this.head = 0;
      this.start = this.end - this.capacity;
      return;
    }
    const keep = endBefore - this.start + chunk.length;
    if (keep > this.storage.length && this.storage.length < this.capacity) {
      this.grow(Math.min(this.capacity, Math.max(keep, this.storage.length * 2, MIN_STORAGE)), endBefore - this.start);
    }
    if (keep > this.storage.length) {
      const drop = keep - this.storage.length;
      this.head = (this.head + drop) % this.storage.length;
      this.start += drop;
    }
    const length = this.storage.length;
    const tail = (this.head + (endBefore - this.start)) % length;
    const first = Math.min(chunk.length, length - tail);
    chunk.copy(this.storage, tail, 0, first);
    if (first < chunk.length) chunk.copy(this.storage, 0, first);
  }

  /**
   * Up to `maxBytes` from `offset` (or from the oldest kept byte when `offset` was dropped), copied
   * out so later appends cannot change it. `start` says where the returned bytes begin.
   */
  read(offset: number, maxBytes: number): { start: number; data: Buffer } {
    const from = Math.min(Math.max(offset, this.start), this.end);
    const count = Math.max(0, Math.min(maxBytes, this.end - from));
    if (count === 0) return { start: from, data: EMPTY };
    const length = this.storage.length;
    const index = (this.head + (from - this.start)) % length;
    const first = Math.min(count, length - index);
    const out = Buffer.allocUnsafe(count);
    this.storage.copy(out, 0, index, index + first);
    if (first < count) this.storage.copy(out, first, 0, count - first);
    return { start: from, data: out };
  }

  close(): void {
    this.ended = true;
  }

  /** Moves the `kept` live bytes to the start of a bigger storage. */
  private grow(size: number, kept: number): void {
    const next = Buffer.allocUnsafe(size);
    if (kept > 0) {
      const first = Math.min(kept, this.storage.length - this.head);
      this.storage.copy(next, 0, this.head, this.head + first);
      if (first < kept) this.storage.copy(next, first, 0, kept - first);
    }
    this.storage = next;
    this.head = 0;
  }
}
