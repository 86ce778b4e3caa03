import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

// Tests import sibling packages from their built `dist` and conformance forks built workers, so a
// test run first brings every build up to date: `tsc -b` is incremental (well under a second when
// nothing changed) and a failed build stops the run instead of testing yesterday's code.
export default function buildFirst(): void {
  if (process.env.VITEST_SKIP_BUILD === "1") return;
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-b", "tsconfig.build.json"], { cwd: import.meta.dirname, stdio: "inherit" });
}
