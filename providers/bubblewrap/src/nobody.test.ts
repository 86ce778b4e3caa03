// Re-runs this provider's worker-level tests (conformance, lifecycle, hostile, the attack reviews') as the unprivileged
// user nobody (uid 65534): vitest, the worker and so every jail run without root. Only when the
// current user is root (it must be, to switch users); elsewhere the same files already run unprivileged.
// CI clones the repo into a folder nobody may not be able to read, so the run always happens in a
// world-readable copy of the checkout (sources, built dist and node_modules; no .git).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));
const canSwitch = process.getuid?.() === 0 && fs.existsSync("/usr/bin/setpriv");

describe.skipIf(!canSwitch)("as uid 65534 (nobody)", () => {
  it("passes conformance, lifecycle, hostile and attack tests", () => {
    const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-nobody-cache-"));
    fs.chownSync(cacheDir, 65534, 65534);
    const copyRoot = worldReadableCopy(repoRoot);
    try {
      const result = spawnSync(
        "/usr/bin/setpriv",
        [
          "--reuid=65534",
          "--regid=65534",
          "--clear-groups",
          "--",
          process.execPath,
          "node_modules/vitest/vitest.mjs",
          "run",
          "--config",
          "providers/bubblewrap/vitest.nobody.config.mjs",
          "--configLoader",
          "native",
          "providers/bubblewrap/src/conformance.test.ts",
          "providers/bubblewrap/src/lifecycle.test.ts",
          "providers/bubblewrap/src/hostile.test.ts",
          "providers/bubblewrap/src/egress-attacks.test.ts",
          "providers/bubblewrap/src/supervisor-attacks.test.ts",
          "packages/sandbox-backend/src/jail-attacks.test.ts",
          "packages/sandbox-backend/src/supervisor-trust.test.ts",
          "packages/sandbox-backend/src/timeout-descendants.test.ts",
          "packages/sandbox-backend/src/dormancy.test.ts",
        ],
        {
          cwd: copyRoot,
          encoding: "utf8",
          timeout: 600_000,
          env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cacheDir, TMPDIR: "/tmp", BWRAP_VITEST_CACHE: cacheDir, NO_COLOR: "1" },
        },
      );
      const output = `${result.stdout}\n${result.stderr}`;
      const summary = output
        .split("\n")
        .filter((line) => /Tests|Test Files|✓|×|skipped|FAIL/.test(line))
        .join("\n");
      console.info(`[nobody run]\n${summary}`);
      expect(result.status, output.slice(-6_000)).toBe(0);
      expect(output).toMatch(/Tests\s+\d+ passed/);
    } finally {
      fs.rmSync(cacheDir, { recursive: true, force: true });
      fs.rmSync(path.dirname(copyRoot), { recursive: true, force: true });
    }
  }, 660_000);
});

/** A copy of the checkout (minus .git) that any user can read, in a fresh directory under /var/tmp. */
function worldReadableCopy(root: string): string {
  const parent = fs.mkdtempSync(path.join("/var/tmp", "bwrap-nobody-repo-"));
  fs.chmodSync(parent, 0o755);
  const copy = path.join(parent, "repo");
  fs.cpSync(root, copy, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (source) => path.basename(source) !== ".git",
  });
  const made = spawnSync("chmod", ["-R", "a+rX", copy]);
  if (made.status !== 0) throw new Error(`chmod of the copy failed: ${made.stderr}`);
  return copy;
}
