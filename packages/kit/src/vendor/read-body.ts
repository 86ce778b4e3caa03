export interface ReadBody {
  bytes: Buffer;
  /** More bytes followed than `maxBytes`; they were discarded. */
  truncated: boolean;
}

/** Reads a body into memory, at most `maxBytes`; the rest is cancelled, not buffered. */
export async function readBody(stream: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<ReadBody> {
  if (!stream) return { bytes: Buffer.alloc(0), truncated: false };
  const reader = stream.getReader();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { bytes: Buffer.concat(chunks, size), truncated: false };
      const room = maxBytes - size;
      if (value.byteLength > room) {
        if (room > 0) chunks.push(Buffer.from(value.buffer, value.byteOffset, room));
        await reader.cancel().catch(() => undefined);
        return { bytes: Buffer.concat(chunks, maxBytes), truncated: true };
      }
      chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
      size += value.byteLength;
    }
  } finally {
    reader.releaseLock();
  }
}
