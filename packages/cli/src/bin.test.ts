import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));

describe("the paperclip-sandbox bin", () => {
  it("runs from a built checkout with npx (npm ci links it; --offline: never fetched from a registry)", async () => {
    const { stdout } = await run("npx", ["--offline", "paperclip-sandbox", "--help"], { cwd: ROOT, env: cleanEnv(), timeout: 60_000 });
    expect(stdout).toMatch(/^paperclip-sandbox: try, measure and clean up Paperclip sandbox providers\n/);
  });

  it("says to build when the CLI is not built", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "cli-bin-"));
    try {
      mkdirSync(path.join(dir, "bin"));
      copyFileSync(path.join(ROOT, "packages", "cli", "bin", "paperclip-sandbox.js"), path.join(dir, "bin", "paperclip-sandbox.js"));
      const failed = await run(process.execPath, [path.join(dir, "bin", "paperclip-sandbox.js"), "--help"]).then(
        () => null,
        (error: { code?: number; stderr?: string }) => error,
      );
      expect(failed?.code).toBe(1);
      expect(failed?.stderr).toBe("paperclip-sandbox: the CLI is not built (run `npm run build` in the checkout)\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
