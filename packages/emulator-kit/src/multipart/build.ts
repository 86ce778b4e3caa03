import { randomBytes } from "node:crypto";

export interface PartInput {
  name: string;
  filename?: string;
  /** Default application/octet-stream for files, none for fields. */
  contentType?: string;
  headers?: Record<string, string>;
  data: Buffer | Uint8Array | string;
}

export interface BuiltMultipart {
  boundary: string;
  /** `multipart/form-data; boundary=…` */
  contentType: string;
  body: Buffer;
}

export interface BuildOptions {
  boundary?: string;
  /** Subtype (default form-data). */
  subtype?: string;
}

/**
 * Builds a multipart body. Names and filenames are escaped as browsers do (`"` → %22, CR/LF →
 * %0D/%0A); a non-ASCII filename also gets an RFC 5987 `filename*`.
 */
export function buildMultipart(parts: readonly PartInput[], options: BuildOptions = {}): BuiltMultipart {
  const payloads = parts.map((part) => (typeof part.data === "string" ? Buffer.from(part.data, "utf8") : Buffer.from(part.data)));
  const boundary = options.boundary ?? `----emulator-kit-${randomBytes(12).toString("hex")}`;
  if (!/^[0-9A-Za-z'()+_,\-./:=? ]{1,70}$/.test(boundary) || boundary.endsWith(" ")) {
    throw new TypeError(`multipart boundary: must be 1..70 characters from RFC 2046's set (got ${JSON.stringify(boundary)})`);
  }
  const marker = Buffer.from(`--${boundary}`);
  if (payloads.some((payload) => payload.includes(marker))) {
    if (options.boundary) throw new TypeError("multipart boundary: occurs inside a part's data; choose another");
    return buildMultipart(parts, options); // a random boundary collided: draw again
  }
  const chunks: Buffer[] = [];
  parts.forEach((part, index) => {
    let disposition = `form-data; name="${escapeQuoted(part.name)}"`;
    if (part.filename !== undefined) {
      disposition += `; filename="${escapeQuoted(part.filename)}"`;
      if (/[^\x20-\x7e]/.test(part.filename)) disposition += `; filename*=utf-8''${encodeRfc5987(part.filename)}`;
    }
    const contentType = part.contentType ?? (part.filename !== undefined ? "application/octet-stream" : undefined);
    const lines = [`--${boundary}`, `Content-Disposition: ${disposition}`];
    if (contentType) lines.push(`Content-Type: ${contentType}`);
    for (const [name, value] of Object.entries(part.headers ?? {})) lines.push(`${name}: ${value.replace(/[\r\n]+/g, " ")}`);
    chunks.push(Buffer.from(lines.join("\r\n") + "\r\n\r\n", "utf8"), payloads[index]!, Buffer.from("\r\n"));
  });
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { boundary, contentType: `multipart/${options.subtype ?? "form-data"}; boundary=${boundary}`, body: Buffer.concat(chunks) };
}

const escapeQuoted = (text: string) => text.replace(/"/g, "%22").replace(/\r/g, "%0D").replace(/\n/g, "%0A");

const encodeRfc5987 = (text: string) => encodeURIComponent(text).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
