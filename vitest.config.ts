import { defineConfig } from "vitest/config";

// One root config: every package's tests run from here, against built workspace packages
// (run `npm run build` first; conformance forks built workers exactly as the host does).
export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "providers/*/src/**/*.test.ts", "providers/*/test/**/*.test.ts", "emulators/*/src/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
