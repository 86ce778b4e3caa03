/**
 * Is package-lock.json current? `npm ci` refuses a lock whose dependency ranges no longer match, but
 * installs happily from one whose workspace entries are stale in every other field npm copies into
 * it (a changed `engines.node`, `version`, `bin`, `license`). This compares each of those fields of
 * the root and of every workspace with its lock entry, and the workspace links.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { readManifest, type PackageManifest } from "./workspace.js";

/** The package.json fields npm records in a workspace's (and the root's) package-lock entry. */
const LOCKED_FIELDS = [
  "name",
  "version",
  "license",
  "bin",
  "engines",
  "os",
  "cpu",
  "workspaces",
  "dependencies",
  "devDependencies",
  "optionalDependencies",
  "peerDependencies",
  "peerDependenciesMeta",
] as const;

interface Lockfile {
  packages?: Record<string, Record<string, unknown>>;
}

/** As npm writes it: a bin string becomes {name: path}, paths lose "./", empty maps are left out. */
function normalized(field: string, value: unknown, manifest: PackageManifest): unknown {
  if (value === undefined || value === null) return undefined;
  if (field === "bin") {
    const entries = typeof value === "string" ? { [String(manifest.name ?? "").replace(/^@[^/]+\//, "")]: value } : (value as Record<string, string>);
    return Object.fromEntries(Object.entries(entries).map(([name, file]) => [name, String(file).replace(/^(\.\/)+/, "")]));
  }
  if (typeof value === "object" && !Array.isArray(value) && Object.keys(value).length === 0) return undefined;
  return value;
}

function entryProblems(where: string, manifest: PackageManifest, entry: Record<string, unknown> | undefined): string[] {
  if (!entry) return [`package-lock.json has no entry for ${where}`];
  const problems: string[] = [];
  for (const field of LOCKED_FIELDS) {
    const expected = normalized(field, manifest[field], manifest);
    const locked = normalized(field, entry[field], manifest);
    if (!isDeepStrictEqual(expected, locked)) {
      problems.push(`package-lock.json is stale for ${where}: ${field} is ${JSON.stringify(locked)} there, ${JSON.stringify(expected)} in its package.json`);
    }
  }
  return problems;
}

/** Every way package-lock.json disagrees with the package.json files of the root and its workspaces. */
export function lockfileProblems(root: string): string[] {
  const rootManifest = readManifest(path.join(root, "package.json"));
  let lock: Lockfile;
  try {
    lock = JSON.parse(readFileSync(path.join(root, "package-lock.json"), "utf8")) as Lockfile;
  } catch (error) {
    return [`package-lock.json cannot be read: ${(error as Error).message}`];
  }
  const packages = lock.packages ?? {};
  const problems = entryProblems("the root package", rootManifest, packages[""]);
  for (const dir of rootManifest.workspaces ?? []) {
    let manifest: PackageManifest;
    try {
      manifest = readManifest(path.join(root, dir, "package.json"));
    } catch {
      problems.push(`workspace ${dir} has no readable package.json`);
      continue;
    }
    problems.push(...entryProblems(dir, manifest, packages[dir]));
    const link = manifest.name ? packages[`node_modules/${manifest.name}`] : undefined;
    if (manifest.name && !(link?.link === true && link.resolved === dir)) {
      problems.push(`package-lock.json does not link node_modules/${manifest.name} to the workspace ${dir}`);
    }
  }
  return problems.map((problem) => `${problem} (run npm install and commit package-lock.json)`);
}
