import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";

export type HttpRequest = IncomingMessage | Http2ServerRequest;
export type HttpResponse = ServerResponse | Http2ServerResponse;

/** Writes to either response kind (their `write` overloads do not unify in TypeScript). */
export function writeChunk(res: HttpResponse, chunk: string | Uint8Array, callback?: (error?: Error | null) => void): boolean {
  return (res as import("node:http").ServerResponse).write(chunk, callback);
}

export function flushHeaders(res: HttpResponse): void {
  (res as import("node:http").ServerResponse).flushHeaders();
}
