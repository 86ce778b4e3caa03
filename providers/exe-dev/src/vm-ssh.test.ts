// The worker's SSH state directory is refused unless it is a private directory of its own: a link
// planted in /tmp, or a directory others may enter, would expose the key file.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runtimeBase } from "./vm-ssh.js";

const parent = mkdtempSync(join(tmpdir(), "exe-rt-test-"));
afterAll(() => rmSync(parent, { recursive: true, force: true }));
const uid = process.getuid!();

describe("runtimeBase", () => {
  it("makes a 0700 directory of this user and accepts it again", async () => {
    const base = await runtimeBase(join(parent, "fresh"));
    expect(base).toBe(join(parent, "fresh", `paperclip-exe-dev-${uid}`));
    expect(await runtimeBase(join(parent, "fresh"))).toBe(base);
  });

  it("refuses a link planted where the directory goes", async () => {
    const elsewhere = join(parent, "elsewhere");
    mkdirSync(elsewhere, { mode: 0o700 });
    mkdirSync(join(parent, "linked"));
    symlinkSync(elsewhere, join(parent, "linked", `paperclip-exe-dev-${uid}`));
    await expect(runtimeBase(join(parent, "linked"))).rejects.toThrow(/is not a private directory of this user .*refusing to keep SSH keys there/);
  });

  it("refuses a directory others may enter", async () => {
    mkdirSync(join(parent, "open", `paperclip-exe-dev-${uid}`), { recursive: true, mode: 0o755 });
    await expect(runtimeBase(join(parent, "open"))).rejects.toThrow(/not a private directory/);
  });
});
