import os from "node:os";
import { defineConfig } from "vitest/config";

// One root config: every package's tests run from here, against built workspace packages
// (conformance forks built workers exactly as the host does); globalSetup builds them first.
export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "emulators/*/src/**/*.test.ts", "providers/*/src/**/*.test.ts", "providers/*/test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Most of a test's time is spent waiting on sandboxes, emulators and workers, not on a CPU: at
    // least three files at once even on a two-core machine (vitest's default there is one).
    maxWorkers: Math.max(3, os.availableParallelism() - 1),
    globalSetup: ["./vitest.build-first.ts"],
  },
});
