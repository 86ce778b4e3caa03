import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { UsageError } from "./errors.js";

/** Our own provider packages, by driverKey, relative to the repository root. */
export const BUILTIN_PROVIDERS: Readonly<Record<string, string>> = Object.freeze({
  bubblewrap: "providers/bubblewrap",
  coder: "providers/coder",
  daytona: "providers/daytona",
  e2b: "providers/e2b",
  "fake-plugin": "providers/fake-plugin",
  kubernetes: "providers/kubernetes",
  modal: "providers/modal",
  novita: "providers/novita",
  "exe-dev": "providers/exe-dev",
  boxd: "providers/boxd",
  cloudflare: "providers/cloudflare",
});

const DEFAULT_PROVIDER = "bubblewrap";

/** The repository root, found from the CLI's own install location (packages/cli/dist/*.js). */
export function cliRepoRoot(moduleUrl: string = import.meta.url): string {
  return path.resolve(path.dirname(fileURLToPath(moduleUrl)), "..", "..", "..");
}

/** Published provider packages are named `<prefix><driverKey>` (the host's own pattern is `@scope/plugin-*`). */
const PROVIDER_PACKAGE_PREFIX = "@paperclip-sandbox/plugin-";

/**
 * An installed provider package beside the CLI outside a checkout (a global or project install of
 * the published packages): `node_modules/@paperclip-sandbox/plugin-<driverKey>` in the CLI's folder
 * or any folder above it, as Node would resolve it from the CLI.
 */
function installedProviderDir(driverKey: string, moduleUrl: string = import.meta.url): string | undefined {
  for (let dir = path.dirname(fileURLToPath(moduleUrl)); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "node_modules", ...`${PROVIDER_PACKAGE_PREFIX}${driverKey}`.split("/"));
    if (existsSync(path.join(candidate, "package.json"))) return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
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
 * Resolves `--provider` to a plugin package directory: a known driverKey maps to our package in the
 * checkout, else to the installed `@paperclip-sandbox/plugin-<driverKey>`; a path (anything with a
 * slash or starting with a dot) must be a directory with a package.json.
 */
export function resolveProvider(spec: string | undefined, cwd: string = process.cwd(), root = cliRepoRoot(), cliModuleUrl: string = import.meta.url): ResolvedProvider {
  const name = spec ?? DEFAULT_PROVIDER;
  if (!looksLikePath(name)) {
    const relative = BUILTIN_PROVIDERS[name];
    const inCheckout = relative === undefined ? undefined : path.join(root, relative);
    const pluginDir = inCheckout !== undefined && existsSync(path.join(inCheckout, "package.json")) ? inCheckout : installedProviderDir(name, cliModuleUrl);
    if (pluginDir !== undefined) return { pluginDir, requestedDriverKey: name, spec: name };
    if (relative === undefined) {
      throw new UsageError(`unknown provider '${name}' (known: ${Object.keys(BUILTIN_PROVIDERS).sort().join(", ")}; or give a path to a plugin package)`);
    }
    throw new UsageError(
      `provider '${name}' is not installed: install ${PROVIDER_PACKAGE_PREFIX}${name} next to the CLI (npm install -g ${PROVIDER_PACKAGE_PREFIX}${name}) or give a path to a plugin package`,
    );
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
