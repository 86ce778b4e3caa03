import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The `version` of the package that holds `moduleUrl` (pass `import.meta.url`): the nearest
 * `package.json` with a name, walking up from the module. A manifest takes its version from here,
 * so the version the host records is the one the release tooling bumped (`package.json` is the
 * only place a version is written).
 */
export function packageVersionOf(moduleUrl: string): string {
  let dir = path.dirname(fileURLToPath(moduleUrl));
  for (;;) {
    const file = path.join(dir, "package.json");
    let text: string | undefined;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      text = undefined;
    }
    if (text !== undefined) {
      const parsed = JSON.parse(text) as { name?: unknown; version?: unknown };
      if (typeof parsed.name === "string") {
        if (typeof parsed.version !== "string" || parsed.version === "") throw new Error(`${file}: no "version"`);
        return parsed.version;
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json with a name above ${fileURLToPath(moduleUrl)}`);
    dir = parent;
  }
}
