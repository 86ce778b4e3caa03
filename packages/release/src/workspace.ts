import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** The package.json fields the release tooling reads. */
export interface PackageManifest {
  name?: string;
  version?: string;
  private?: boolean;
  license?: string;
  type?: string;
  main?: string;
  types?: string;
  exports?: unknown;
  bin?: string | Record<string, string>;
  files?: string[];
  engines?: Record<string, string>;
  os?: string[];
  publishConfig?: Record<string, unknown>;
  paperclipPlugin?: { manifest?: string; worker?: string };
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  workspaces?: string[];
  [key: string]: unknown;
}

export interface WorkspacePackage {
  /** Directory relative to the repository root, with forward slashes (`providers/bubblewrap`). */
  dir: string;
  absDir: string;
  manifest: PackageManifest;
  /** Published to the registry (not `private`). */
  isPublic: boolean;
}

/** Where packages live; every folder here with a package.json is a workspace package. */
const PACKAGE_PARENTS = ["packages", "providers", "emulators"] as const;

export function readManifest(file: string): PackageManifest {
  return JSON.parse(readFileSync(file, "utf8")) as PackageManifest;
}

/**
 * Every package folder under `packages/`, `providers/` and `emulators/` (whether or not the root
 * lists it in `workspaces`; the rules check that it does), sorted by directory.
 */
export function listWorkspacePackages(root: string): WorkspacePackage[] {
  const found: WorkspacePackage[] = [];
  for (const parent of PACKAGE_PARENTS) {
    const parentDir = path.join(root, parent);
    if (!existsSync(parentDir)) continue;
    for (const entry of readdirSync(parentDir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const absDir = path.join(parentDir, entry.name);
      const file = path.join(absDir, "package.json");
      if (!existsSync(file)) continue;
      const manifest = readManifest(file);
      found.push({ dir: `${parent}/${entry.name}`, absDir, manifest, isPublic: manifest.private !== true });
    }
  }
  return found.sort((a, b) => (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0));
}

export function publicPackages(root: string): WorkspacePackage[] {
  return listWorkspacePackages(root).filter((p) => p.isPublic);
}

/**
 * Public packages in dependency order (a package after every internal package it depends on), ties
 * by name: the order to publish in, so a registry never holds a package whose dependency is missing.
 */
export function inDependencyOrder(packages: readonly WorkspacePackage[]): WorkspacePackage[] {
  const byName = new Map(packages.map((p) => [p.manifest.name ?? p.dir, p]));
  const done = new Set<string>();
  const ordered: WorkspacePackage[] = [];
  const visit = (pkg: WorkspacePackage, trail: string[]) => {
    const name = pkg.manifest.name ?? pkg.dir;
    if (done.has(name)) return;
    if (trail.includes(name)) throw new Error(`dependency cycle: ${[...trail, name].join(" -> ")}`);
    const deps = Object.keys({ ...pkg.manifest.dependencies, ...pkg.manifest.optionalDependencies, ...pkg.manifest.peerDependencies }).sort();
    for (const dep of deps) {
      const target = byName.get(dep);
      if (target) visit(target, [...trail, name]);
    }
    done.add(name);
    ordered.push(pkg);
  };
  for (const pkg of [...packages].sort((a, b) => ((a.manifest.name ?? "") < (b.manifest.name ?? "") ? -1 : 1))) visit(pkg, []);
  return ordered;
}
