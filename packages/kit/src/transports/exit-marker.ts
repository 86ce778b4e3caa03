import type { ChunkFilter } from "./stream-delivery.js";

/**
 * The stderr line a remote wrapper prints as its last act, so a client that cannot see the remote
 * exit (a channel held open by a background child) still learns it. The marker is a per-call nonce.
 */
export function exitMarkerLine(marker: string, statusExpression = "$?"): string {
  return `printf '\\n%s:%d\\n' '${marker}' "${statusExpression}" >&2`;
}

/** Strips the exit-marker line from a stream and reports the status it carried (once). */
export class ExitMarkerScanner {
  seen = false;
  private readonly needle: Buffer;
  private pending: Buffer = Buffer.alloc(0);
  private listener: ((status: number) => void) | undefined;

  constructor(marker: string) {
    this.needle = Buffer.from(`\n${marker}:`);
  }

  onExit(listener: (status: number) => void): void {
    this.listener = listener;
  }

  readonly filter: ChunkFilter = {
    push: (chunk) => this.push(chunk),
    flush: () => {
      const rest = this.pending;
      this.pending = Buffer.alloc(0);
      return rest;
    },
  };

  private push(chunk: Buffer): Buffer {
    if (this.seen) return chunk;
    const data = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    this.pending = Buffer.alloc(0);
    const at = data.indexOf(this.needle);
    if (at >= 0) {
      const lineEnd = data.indexOf(0x0a, at + this.needle.length);
      if (lineEnd < 0) {
        this.pending = data.subarray(at);
        return data.subarray(0, at);
      }
      const status = Number(data.subarray(at + this.needle.length, lineEnd).toString("latin1"));
      this.seen = true;
      this.listener?.(Number.isInteger(status) ? status : 255);
      return Buffer.concat([data.subarray(0, at), data.subarray(lineEnd + 1)]);
    }
    // Hold back a tail that could be the start of the marker, so a split marker is still found.
    const keep = partialPrefixLength(data, this.needle);
    this.pending = data.subarray(data.length - keep);
    return data.subarray(0, data.length - keep);
  }
}

/** Length of the longest suffix of `data` that is a proper prefix of `needle`. */
function partialPrefixLength(data: Buffer, needle: Buffer): number {
  const max = Math.min(needle.length - 1, data.length);
  for (let length = max; length > 0; length -= 1) {
    if (data.subarray(data.length - length).equals(needle.subarray(0, length))) return length;
  }
  return 0;
}
