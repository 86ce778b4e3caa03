import { rmSync, mkdtempSync, statSync, writeFileSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { writePrivateFile } from "./private-file.js";

describe("writePrivateFile", () => {
  it("creates the file 0600 and replaces a wider existing file with a 0600 one", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "pcs-private-"));
    const file = path.join(dir, "report.json");
    await writePrivateFile(file, "one");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    writeFileSync(file, "old", { mode: 0o644 });
    await writePrivateFile(file, "two");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8")).toBe("two");
    rmSync(dir, { recursive: true, force: true });
  });
});
