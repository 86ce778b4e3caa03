import { StringDecoder } from "node:string_decoder";

/**
 * Splits a byte stream into lines. Chunks are kept in a list until a newline arrives so a
 * message of several MiB costs one join, not a quadratic chain of string concatenations,
 * and a multi-byte UTF-8 character split across chunks is decoded intact.
 */
export class NdjsonLineSplitter {
  private readonly decoder = new StringDecoder("utf8");
  private pending: string[] = [];

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: Buffer | string): void {
    let text = typeof chunk === "string" ? chunk : this.decoder.write(chunk);
    let newline = text.indexOf("\n");
    while (newline !== -1) {
      this.pending.push(text.slice(0, newline));
      const line = this.pending.join("");
      this.pending = [];
      this.emit(line);
      text = text.slice(newline + 1);
      newline = text.indexOf("\n");
    }
    if (text.length > 0) this.pending.push(text);
  }

  /** Emit whatever is left as a last line (a stream may end without a trailing newline). */
  end(): void {
    const rest = this.decoder.end();
    if (rest.length > 0) this.pending.push(rest);
    if (this.pending.length > 0) {
      const line = this.pending.join("");
      this.pending = [];
      this.emit(line);
    }
  }

  private emit(line: string): void {
    const trimmed = line.endsWith("\r") ? line.slice(0, -1) : line;
    if (trimmed.trim().length > 0) this.onLine(trimmed);
  }
}
