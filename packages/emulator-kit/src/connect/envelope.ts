/** Connect / gRPC-web style message envelope: flags (1 byte), length (u32 BE), payload. */
export const FLAG_COMPRESSED = 0x01;
export const FLAG_END_STREAM = 0x02;

export interface Envelope {
  flags: number;
  data: Buffer;
}

export function encodeEnvelope(flags: number, data: Buffer | string): Buffer {
  const payload = typeof data === "string" ? Buffer.from(data, "utf8") : data;
  const header = Buffer.alloc(5);
  header.writeUInt8(flags, 0);
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

export class EnvelopeError extends Error {
  constructor(
    message: string,
    readonly tooLarge = false,
  ) {
    super(message);
    this.name = "EnvelopeError";
  }
}

/** Splits a byte stream into envelopes, refusing any larger than `maxMessageBytes`. */
export async function* readEnvelopes(source: AsyncIterable<Buffer | string>, maxMessageBytes: number): AsyncGenerator<Envelope> {
  let buffer = Buffer.alloc(0);
  for await (const chunk of source) {
    buffer = Buffer.concat([buffer, typeof chunk === "string" ? Buffer.from(chunk) : chunk]);
    for (;;) {
      if (buffer.length < 5) break;
      const length = buffer.readUInt32BE(1);
      if (length > maxMessageBytes) throw new EnvelopeError(`message of ${length} bytes exceeds the ${maxMessageBytes}-byte limit`, true);
      if (buffer.length < 5 + length) break;
      yield { flags: buffer[0]!, data: buffer.subarray(5, 5 + length) };
      buffer = buffer.subarray(5 + length);
    }
  }
  if (buffer.length > 0) throw new EnvelopeError(`stream ended inside an envelope (${buffer.length} stray bytes)`);
}
