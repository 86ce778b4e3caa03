import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

export function sha256File(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/** `sha256sum`'s format (`<hex>  <name>`), one line a file, sorted by name: `sha256sum -c` checks it. */
export function formatChecksums(entries: ReadonlyArray<{ file: string; sha256: string }>): string {
  return [...entries]
    .sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
    .map((e) => `${e.sha256}  ${e.file}\n`)
    .join("");
}
