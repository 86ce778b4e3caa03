import { parseSSEStream, type Sandbox } from "@cloudflare/sandbox";
import { Buffer } from "node:buffer";
import { BridgeError } from "./http.js";
import { CONTROL_SESSION_ID, controlExec } from "./sandboxes.js";
import { quote } from "./shell.js";

/** Bytes per `writeFile` (base64 in a JSON body to the container): bounded Worker memory per upload. */
const UPLOAD_PART_BYTES = 4 * 1024 * 1024;

export function absolutePath(raw: string | null): string {
  if (!raw || !raw.startsWith("/") || raw.includes("\0")) throw new BridgeError(400, "invalid_request", "path must be an absolute POSIX path.");
  return raw;
}

export function parseMode(raw: string | null): number | undefined {
  if (raw === null || raw === "") return undefined;
  if (!/^[0-7]{1,4}$/.test(raw)) throw new BridgeError(400, "invalid_request", "mode must be octal digits, e.g. 644.");
  return Number.parseInt(raw, 8);
}

/**
 * Writes the request body to `path`: parts of at most UPLOAD_PART_BYTES each go to the container as
 * one `writeFile` (base64), then one command joins them into a temporary file beside the target,
 * applies the mode and renames it over the target (readers never see a partial file).
 */
export async function uploadFile(sandbox: Sandbox, path: string, body: ReadableStream<Uint8Array> | null, mode: number | undefined): Promise<number> {
  const stem = `${path}.paperclip-upload-${crypto.randomUUID().slice(0, 8)}`;
  const parts: string[] = [];
  let total = 0;
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  const flush = async () => {
    const part = `${stem}.part${parts.length}`;
    const bytes = Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    parts.push(part);
    await sandbox.writeFile(part, bytes.toString("base64"), { encoding: "base64", sessionId: CONTROL_SESSION_ID });
  };
  try {
    if (body) {
      const reader = body.getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        let chunk = value;
        while (chunk.byteLength > 0) {
          const take = Math.min(chunk.byteLength, UPLOAD_PART_BYTES - pendingBytes);
          pending.push(chunk.subarray(0, take));
          pendingBytes += take;
          total += take;
          chunk = chunk.subarray(take);
          if (pendingBytes === UPLOAD_PART_BYTES) await flush();
        }
      }
    }
    if (pendingBytes > 0 || parts.length === 0) await flush();
    const tmp = `${stem}.tmp`;
    const chmod = mode === undefined ? "" : ` && chmod ${mode.toString(8)} ${quote(tmp)}`;
    await controlExec(sandbox, `cat ${parts.map(quote).join(" ")} > ${quote(tmp)}${chmod} && mv -f ${quote(tmp)} ${quote(path)} && rm -f ${parts.map(quote).join(" ")}`, `Write ${path}`);
    return total;
  } catch (error) {
    await controlExec(sandbox, `rm -f ${quote(stem)}.part* ${quote(`${stem}.tmp`)}`, "Remove a failed upload").catch(() => undefined);
    throw error;
  }
}

/**
 * The bytes of `path`, streamed from the container's file stream (binary files arrive base64 per
 * 64 KiB chunk and are decoded here; a file the container classes as text arrives as UTF-8 text).
 */
export async function downloadFile(sandbox: Sandbox, path: string): Promise<ReadableStream<Uint8Array>> {
  let source: ReadableStream<Uint8Array>;
  try {
    source = await sandbox.readFileStream(path, { sessionId: CONTROL_SESSION_ID });
  } catch (error) {
    throw asFileError(error, path);
  }
  const events = parseSSEStream<{ type: string; data?: string; isBinary?: boolean; encoding?: string; error?: string }>(source)[Symbol.asyncIterator]();
  // The first event decides: an error (e.g. not found) is an HTTP error, not a broken stream.
  const first = await events.next();
  if (first.done) throw new BridgeError(502, "file_stream_failed", `The container ended the stream of ${path} before its metadata.`);
  if (first.value.type === "error") throw asFileError(new Error(first.value.error ?? "file stream failed"), path);
  let binary = first.value.type === "metadata" ? first.value.isBinary === true && first.value.encoding === "base64" : false;
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const next = await events.next();
        if (next.done) return controller.error(new Error(`the container's stream of ${path} ended without completion`));
        const event = next.value;
        if (event.type === "metadata") binary = event.isBinary === true && event.encoding === "base64";
        else if (event.type === "chunk" && typeof event.data === "string") {
          controller.enqueue(binary ? new Uint8Array(Buffer.from(event.data, "base64")) : encoder.encode(event.data));
          return;
        } else if (event.type === "complete") return controller.close();
        else if (event.type === "error") return controller.error(new Error(`File streaming error: ${event.error ?? "unknown"}`));
      }
    },
    cancel: () => void source.cancel().catch(() => undefined),
  });
}

function asFileError(error: unknown, path: string): BridgeError {
  const message = error instanceof Error ? error.message : String(error);
  if (/not found|no such file|ENOENT|does not exist/i.test(message) || (error as { code?: unknown }).code === "FILE_NOT_FOUND") return new BridgeError(404, "file_not_found", `No file at ${path}.`);
  return new BridgeError(500, "internal_error", message);
}
