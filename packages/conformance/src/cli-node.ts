import { spawnSync } from "node:child_process";
import { dirname } from "node:path";

/**
 * Why a test that spawns the `paperclip-sandbox` CLI (`cliMain`, its dist/main.js) on this Node
 * cannot run, or undefined when it can. The CLI's lease database is better-sqlite3, a native module
 * built for the Node that installed it (20 on this repository's machines): on another Node (the host's
 * 24 in the Node 24 pass) it fails to load, so such a test belongs to the installing Node's pass.
 */
/** Loaded by the probe in the CLI's own directory, never by this package (a string, not an import). */
const CLI_DATABASE_MODULE = "better-sqlite3";

export function cliSkipReason(cliMain: string): string | undefined {
  const probeScript = `require(${JSON.stringify(CLI_DATABASE_MODULE)})(":memory:").close()`;
  const probe = spawnSync(process.execPath, ["-e", probeScript], { cwd: dirname(cliMain), encoding: "utf8", timeout: 60_000 });
  if (probe.status === 0) return undefined;
  const stderr = probe.stderr ?? "";
  const built = /using\s+NODE_MODULE_VERSION\s+(\d+)/.exec(stderr)?.[1];
  const why = built
    ? `it is built for modules ${built}`
    : stderr
        .split("\n")
        .find((line) => /Error/.test(line))
        ?.trim() || `the check ended with ${probe.status ?? probe.signal}`;
  return `the CLI's better-sqlite3 does not load on Node ${process.version} (modules ${process.versions.modules}): ${why}; the pass on the Node that installed it runs this`;
}
