import fs from "node:fs";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import type { FileTransport } from "../../transport.js";
import { envdApiError } from "./errors.js";
import type { EnvdFiles } from "./sdk-shapes.js";

export interface EnvdFileTransportOptions {
  vendor: string;
  /**
   * How uploads travel: `stream` hands the SDK a ReadableStream (e2b sends it as a streamed
   * octet-stream body); `blob` hands it a Blob (Novita's SDK always buffers into a multipart Blob,
   * so a file source becomes a file-backed Blob and is not read into memory first).
   */
  upload: "stream" | "blob";
  /** The SDK's request timeout; long transfers get more, in proportion to their size. */
  requestTimeoutMs: number;
  /** The SDK bounds a download's whole body by its request timeout (Novita): pass 0 and bound it here. */
  downloadTimeoutIsWholeBody?: boolean;
}

/** A slow link still moves this much per second before an upload is given up (1 MiB/s). */
const MIN_BYTES_PER_SECOND = 1024 * 1024;

/**
 * envd's `/files` as the kit's FileTransport: one request per upload and per download, bytes as they
 * are. envd cannot set a mode on upload (files land 0644 as the sandbox user); the kit's file-API
 * sync only uploads to a scratch file that its install script then moves and chmods.
 */
export function envdFileTransport(files: EnvdFiles, options: EnvdFileTransportOptions): FileTransport {
  const transferTimeout = (size: number | undefined) => options.requestTimeoutMs + Math.ceil(((size ?? 0) / MIN_BYTES_PER_SECOND) * 1000);
  return {
    async upload(path, source, opts = {}) {
      try {
        if (options.upload === "stream") {
          await files.write(path, Readable.toWeb(source) as unknown as ReadableStream<Uint8Array>, {
            requestTimeoutMs: transferTimeout(opts.size),
            ...(opts.signal ? { signal: opts.signal } : {}),
          });
        } else {
          const blob = await blobOf(source);
          await files.write(path, blob, { requestTimeoutMs: transferTimeout(blob.size) });
        }
      } catch (error) {
        throw envdApiError(options.vendor, "files.write", error);
      }
    },
    async download(path, opts = {}) {
      try {
        const web = await files.read(path, {
          format: "stream",
          requestTimeoutMs: options.downloadTimeoutIsWholeBody ? 0 : options.requestTimeoutMs,
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
        return Readable.fromWeb(web as unknown as WebReadableStream<Uint8Array>, opts.signal ? { signal: opts.signal } : {});
      } catch (error) {
        throw envdApiError(options.vendor, "files.read", error);
      }
    },
  };
}

/** A file-backed Blob for a file stream (nothing read yet), else the stream's bytes. */
async function blobOf(source: Readable): Promise<Blob> {
  const path = (source as Readable & { path?: unknown }).path;
  if (source instanceof fs.ReadStream && typeof path === "string") {
    source.destroy();
    return fs.openAsBlob(path);
  }
  return new Response(Readable.toWeb(source) as unknown as ReadableStream<Uint8Array>).blob();
}
