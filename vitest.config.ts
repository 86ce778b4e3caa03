import { defineConfig } from "vitest/config";

// One root config: every package's tests run from here, against built workspace packages
// (conformance forks built workers exactly as the host does); globalSetup builds them first.
export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "emulators/*/src/**/*.test.ts", "providers/*/src/**/*.test.ts", "providers/*/test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    globalSetup: ["./vitest.build-first.ts"],
  },
});
