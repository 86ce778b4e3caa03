import { constants as h2 } from "node:http2";
import type { Http2ServerResponse } from "node:http2";
import type { ServerResponse } from "node:http";
import type { RecordHandle } from "../recorder/recorder.js";
import type { HttpResponse } from "./types.js";

export interface ResponseTap {
  /** Ends the exchange abruptly: the TCP connection (HTTP/1) or the stream (RST_STREAM on HTTP/2). */
  cut(): void;
  readonly isCut: boolean;
}

type WriteCallback = (error?: Error | null) => void;

/**
 * Counts response body bytes into the record and, when `cutAfterBytes` is set (the reset fault),
 * lets the status line, headers and that many body bytes out before cutting the connection.
 */
export function tapResponse(res: HttpResponse, record: RecordHandle, cutAfterBytes?: number): ResponseTap {
  const response = res as ServerResponse & Http2ServerResponse;
  const write = response.write.bind(response) as (chunk: unknown, encoding?: unknown, callback?: unknown) => boolean;
  const end = response.end.bind(response) as (chunk?: unknown, encoding?: unknown, callback?: unknown) => unknown;
  let sent = 0;
  let isCut = false;

  const cut = () => {
    if (isCut && response.destroyed) return;
    isCut = true;
    if ("stream" in response && response.stream) response.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
    else response.socket?.destroy();
  };

  // Sends what the reset fault lets through, then cuts once it has reached the socket.
  const cutWith = (prefix: Buffer) => {
    isCut = true;
    record.addBytesOut(prefix.length);
    if (!response.headersSent) response.flushHeaders();
    if (prefix.length === 0) setImmediate(cut);
    else write(prefix, () => cut());
  };

  response.write = ((chunk: unknown, encoding?: unknown, callback?: unknown): boolean => {
    if (isCut) return false;
    const bytes = toBuffer(chunk, encoding);
    if (cutAfterBytes !== undefined && sent + bytes.length >= cutAfterBytes) {
      cutWith(bytes.subarray(0, cutAfterBytes - sent));
      return false;
    }
    sent += bytes.length;
    record.addBytesOut(bytes.length);
    return write(chunk, encoding, callback);
  }) as typeof response.write;

  const tappedEnd = (chunk?: unknown, encoding?: unknown, callback?: unknown): unknown => {
    if (typeof chunk === "function") return tappedEnd(undefined, undefined, chunk as WriteCallback);
    if (typeof encoding === "function") return tappedEnd(chunk, undefined, encoding as WriteCallback);
    if (isCut) return response;
    const bytes = chunk === undefined || chunk === null ? Buffer.alloc(0) : toBuffer(chunk, encoding);
    if (cutAfterBytes !== undefined) {
      // Announce the whole body so the client knows it was cut short.
      if (!response.headersSent && !response.hasHeader("content-length")) response.setHeader("content-length", sent + bytes.length);
      cutWith(bytes.subarray(0, Math.max(0, cutAfterBytes - sent)));
      return response;
    }
    record.addBytesOut(bytes.length);
    return end(chunk, encoding, callback);
  };
  response.end = tappedEnd as typeof response.end;

  return {
    cut,
    get isCut() {
      return isCut;
    },
  };
}

function toBuffer(chunk: unknown, encoding: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === "string") return Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  return Buffer.from(String(chunk));
}
