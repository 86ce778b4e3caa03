// Used by src/nobody.test.ts to re-run tests as uid 65534: a plain .mjs config loaded natively,
// because vite's default loader writes a bundled copy into node_modules (not writable by nobody).
import { defineConfig } from "vitest/config";

export default defineConfig({
  cacheDir: process.env.BWRAP_VITEST_CACHE ?? "/tmp/bwrap-vitest-nobody-cache",
  test: {
    // The backend's attack tests too: what an unprivileged worker's jails must withstand.
    include: [
      "providers/bubblewrap/src/**/*.test.ts",
      "packages/sandbox-backend/src/jail-attacks.test.ts",
      "packages/sandbox-backend/src/supervisor-trust.test.ts",
      "packages/sandbox-backend/src/timeout-descendants.test.ts",
      "packages/sandbox-backend/src/dormancy.test.ts",
    ],
    exclude: ["**/nobody.test.ts", "**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
