// Sync benches' source trees: made with distinct file contents, compared by digest after a round trip.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/** `files` files of `totalBytes` in all under `dir`, spread over up to 100 directories. */
export function makeTree(dir, files, totalBytes) {
  const fileBytes = Math.floor(totalBytes / files);
  for (let i = 0; i < files; i += 1) {
    const sub = path.join(dir, `d${i % 100}`);
    if (i < 100) fs.mkdirSync(sub, { recursive: true });
    // Distinct contents (no two files alike), so nothing along the way can shortcut the bytes.
    const chunk = Buffer.alloc(fileBytes, i % 251);
    chunk.writeUInt32BE(i, 0);
    fs.writeFileSync(path.join(sub, `f${i}.bin`), chunk);
  }
}

/** One sha256 over every file's name and bytes, in sorted order. */
export function treeDigest(dir) {
  const hash = createHash("sha256");
  const walk = (d) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      if (fs.statSync(p).isDirectory()) walk(p);
      else hash.update(name).update(fs.readFileSync(p));
    }
  };
  walk(dir);
  return hash.digest("hex");
}
