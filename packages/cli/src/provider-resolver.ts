import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { UsageError } from "./errors.js";

/** Our own provider packages, by driverKey, relative to the repository root. */
export const BUILTIN_PROVIDERS: Readonly<Record<string, string>> = Object.freeze({
  bubblewrap: "providers/bubblewrap",
  daytona: "providers/daytona",
  "fake-plugin": "providers/fake-plugin",
  kubernetes: "providers/kubernetes",
  modal: "providers/modal",
});

export const DEFAULT_PROVIDER = "bubblewrap";

/** The repository root, found from the CLI's own install location (packages/cli/dist/*.js). */
export function cliRepoRoot(moduleUrl: string = import.meta.url): string {
  return path.resolve(path.dirname(fileURLToPath(moduleUrl)), "..", "..", "..");
}

export interface ResolvedProvider {
  /** Absolute directory of the plugin package (the one holding package.json). */
  pluginDir: string;
  /** The driverKey the operator asked for, when they named one; otherwise chosen from the manifest. */
  requestedDriverKey: string | undefined;
  /** How the operator named the provider, for messages. */
  spec: string;
}

function looksLikePath(spec: string): boolean {
  return spec.includes("/") || spec.includes(path.sep) || spec.startsWith(".") || spec === "~";
}

/**
 * Resolves `--provider` to a plugin package directory: a known driverKey maps to our package; a
 * path (anything with a slash or starting with a dot) must be a directory with a package.json.
 */
export function resolveProvider(spec: string | undefined, cwd: string = process.cwd(), root = cliRepoRoot()): ResolvedProvider {
  const name = spec ?? DEFAULT_PROVIDER;
  if (!looksLikePath(name)) {
    const relative = BUILTIN_PROVIDERS[name];
    if (relative === undefined) {
      throw new UsageError(
        `unknown provider '${name}' (known: ${Object.keys(BUILTIN_PROVIDERS).sort().join(", ")}; or give a path to a plugin package)`,
      );
    }
    const pluginDir = path.join(root, relative);
    if (!existsSync(path.join(pluginDir, "package.json"))) {
      throw new UsageError(`provider '${name}' is not installed at ${pluginDir}`);
    }
    return { pluginDir, requestedDriverKey: name, spec: name };
  }
  const pluginDir = path.resolve(cwd, name);
  if (!existsSync(pluginDir) || !statSync(pluginDir).isDirectory()) {
    throw new UsageError(`provider path '${name}' is not a directory`);
  }
  if (!existsSync(path.join(pluginDir, "package.json"))) {
    throw new UsageError(`provider path '${name}' has no package.json (expected a plugin package)`);
  }
  return { pluginDir, requestedDriverKey: undefined, spec: name };
}
