import type { Readable } from "node:stream";
import { HttpError } from "./errors.js";

/** Default cap on buffered request bodies (JSON and text): 1 MiB. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** Buffers a body, answering 413 past `limit` bytes (the rest of the upload is not read). */
export async function readBytes(stream: Readable, limit: number = DEFAULT_BODY_LIMIT): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
    total += buffer.length;
    if (total > limit) {
      stream.destroy();
      throw new HttpError(413, `request body exceeds the ${limit}-byte limit`, { code: "body_too_large" });
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks, total);
}

/** Parses a JSON body; `undefined` when the body is empty. */
export async function readJson<T = unknown>(stream: Readable, limit: number = DEFAULT_BODY_LIMIT): Promise<T | undefined> {
  const bytes = await readBytes(stream, limit);
  if (bytes.length === 0) return undefined;
  try {
    return JSON.parse(bytes.toString("utf8")) as T;
  } catch (error) {
    throw new HttpError(400, `request body is not valid JSON: ${(error as Error).message}`, { code: "invalid_json" });
  }
}
