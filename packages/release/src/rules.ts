import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { importedPackages } from "./imports.js";
import type { PackedFile } from "./npm.js";
import type { PackageManifest, WorkspacePackage } from "./workspace.js";
import { minimumNodeVersion, nodeSatisfies } from "./node-engine.js";

// The publishing rules of docs/PUBLISHING.md, as checks. Every function returns the problems it
// found, each naming the package, the field and the rule; an empty list means the package passes.

export const SCOPE = "@paperclip-sandbox/";
/** The host finds npm-installed plugins named `@scope/plugin-*` (plugin-loader isPluginPackageName). */
export const PROVIDER_NAME_PREFIX = `${SCOPE}plugin-`;
export const LICENSE = "MIT";
/**
 * The lowest Node whose APIs the built code uses (AbortSignal.any: 20.3); the host runs Node 24. A
 * package whose dependencies need more says so with a higher ">=X.Y.Z" (kubernetes: undici 8).
 */
export const NODE_ENGINE = ">=20.3.0";
/** Linux-only packages: they run bubblewrap jails. */
export const LINUX_ONLY = new Set(["@paperclip-sandbox/sandbox-backend", "@paperclip-sandbox/plugin-bubblewrap"]);
/**
 * Third-party runtime dependencies a package outside providers/ may have. A vendor SDK belongs to
 * its provider alone: a shared package that wants another dependency adds it here, in review.
 */
export const SHARED_THIRD_PARTY = new Set(["@paperclipai/plugin-sdk", "zod", "tar", "yaml", "better-sqlite3", "ws", "@grpc/grpc-js", "@grpc/proto-loader", "ssh2"]);
/** Top-level entries a tarball may hold besides dist/ (bin shims, data files a package reads). */
export const EXTRA_SHIPPED_DIRS = new Set(["bin", "proto"]);

const EXACT_VERSION = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;
const ALWAYS_PACKED = new Set(["package.json", "README.md", "LICENSE", "CHANGELOG.md"]);
/** What a tarball must never carry: sources, maps, build state, tests, fixtures, configs. */
const NOT_SHIPPED: Array<[RegExp, string]> = [
  [/(?<!\.d)\.(m|c)?ts$/, "TypeScript source"],
  [/\.map$/, "source map (its sources are not shipped)"],
  [/\.tsbuildinfo$/, "tsc build state"],
  [/(^|\/)[^/]*\.test\.[^/]+$/, "test file"],
  [/(^|\/)__fixtures__\//, "test fixture"],
  [/(^|\/)tsconfig[^/]*\.json$/, "tsconfig"],
  [/(^|\/)vitest[^/]*$/, "test config"],
];

export interface PackageContext {
  pkg: WorkspacePackage;
  /** Every package folder of the repository (public and private). */
  all: readonly WorkspacePackage[];
  /** What `npm pack` puts in the tarball. */
  packed: readonly PackedFile[];
  /** The repository's LICENSE text. */
  rootLicense: string;
  /** The `dependencies` of an installed third-party package (empty when it is not installed). */
  dependenciesOf: (name: string) => Record<string, string>;
}

const isProviderDir = (dir: string) => dir.startsWith("providers/");

/** Every rule for one public package. */
export async function checkPublicPackage(ctx: PackageContext): Promise<string[]> {
  const { pkg } = ctx;
  const m = pkg.manifest;
  const label = m.name ?? pkg.dir;
  const problems = [
    ...checkIdentity(pkg),
    ...checkShippedFiles(ctx),
    ...checkEntryPoints(ctx),
    ...checkDependencies(ctx),
    ...checkDependenciesMatchImports(ctx),
    ...(isProviderDir(pkg.dir) ? await checkPluginEntry(ctx) : []),
  ];
  return problems.map((p) => `${label} (${pkg.dir}): ${p}`);
}

function nodeEngineAtLeastFloor(range: string | undefined): boolean {
  const minimum = minimumNodeVersion(range);
  return minimum !== null && nodeSatisfies(NODE_ENGINE, minimum.join("."));
}

function checkIdentity(pkg: WorkspacePackage): string[] {
  const m = pkg.manifest;
  const problems: string[] = [];
  if (!m.name?.startsWith(SCOPE)) problems.push(`name: must be in the ${SCOPE} scope`);
  if (isProviderDir(pkg.dir) && !m.name?.startsWith(PROVIDER_NAME_PREFIX)) problems.push(`name: a provider is named ${PROVIDER_NAME_PREFIX}<name> (the host's plugin pattern)`);
  if (!m.version || !EXACT_VERSION.test(m.version)) problems.push(`version: must be a semver version, got ${JSON.stringify(m.version)}`);
  if (m.license !== LICENSE) problems.push(`license: must be "${LICENSE}"`);
  if (m.type !== "module") problems.push(`type: must be "module"`);
  if (typeof m.description !== "string" || m.description.length < 10) problems.push("description: must say what the package is");
  if (!nodeEngineAtLeastFloor(m.engines?.node)) problems.push(`engines.node: must be "${NODE_ENGINE}" or a higher ">=X.Y.Z", got ${JSON.stringify(m.engines?.node)}`);
  const linux = JSON.stringify(m.os) === JSON.stringify(["linux"]);
  if (LINUX_ONLY.has(m.name ?? "") && !linux) problems.push(`os: must be ["linux"] (it runs bubblewrap jails)`);
  if (!LINUX_ONLY.has(m.name ?? "") && m.os !== undefined) problems.push("os: only bubblewrap-based packages restrict the OS");
  if (m.publishConfig?.access !== "public") problems.push(`publishConfig.access: must be "public" (a scoped package is private on the registry otherwise)`);
  return problems;
}

function checkShippedFiles(ctx: PackageContext): string[] {
  const { pkg, packed } = ctx;
  const problems: string[] = [];
  const files = pkg.manifest.files;
  if (!Array.isArray(files) || !files.includes("dist")) problems.push(`files: must list "dist" (and only what ships)`);
  const paths = new Set(packed.map((f) => f.path));
  for (const name of ["README.md", "LICENSE"]) if (!paths.has(name)) problems.push(`tarball: has no ${name}`);
  for (const file of packed) {
    const top = file.path.split("/")[0] ?? "";
    if (!ALWAYS_PACKED.has(file.path) && top !== "dist" && !EXTRA_SHIPPED_DIRS.has(top))
      problems.push(`tarball: ships ${file.path} (only dist/, README.md, LICENSE${[...EXTRA_SHIPPED_DIRS].map((d) => `, ${d}/`).join("")})`);
    for (const [pattern, what] of NOT_SHIPPED) if (pattern.test(file.path)) problems.push(`tarball: ships ${file.path} (${what})`);
  }
  if (paths.has("LICENSE")) {
    const text = readFileSync(path.join(pkg.absDir, "LICENSE"), "utf8");
    if (text !== ctx.rootLicense) problems.push("LICENSE: must be the repository's LICENSE, unchanged");
  }
  return problems;
}

/** `exports`, `main`, `types` and `bin`: every target ships, JavaScript has declarations, `types` comes first. */
function checkEntryPoints(ctx: PackageContext): string[] {
  const { pkg, packed } = ctx;
  const m = pkg.manifest;
  const shipped = new Set(packed.map((f) => f.path));
  const problems: string[] = [];
  const ships = (target: string, field: string) => {
    if (!target.startsWith("./")) problems.push(`${field}: "${target}" must start with "./"`);
    else if (!shipped.has(target.slice(2))) problems.push(`${field}: "${target}" is not in the tarball (built? listed in files?)`);
  };
  if (m.exports === undefined || typeof m.exports !== "object" || m.exports === null) {
    problems.push(`exports: must be an object with at least "."`);
    return problems;
  }
  const exportsMap = m.exports as Record<string, unknown>;
  // A command-line package (bin, no ".") exports nothing to import, so it has no main or types either.
  const binOnly = m.bin !== undefined && !("." in exportsMap);
  if (!("." in exportsMap) && !binOnly) problems.push(`exports: has no "." entry`);
  if (binOnly && (m.main !== undefined || m.types !== undefined)) problems.push(`main/types: a bin-only package (no exports ".") has neither`);
  for (const [subpath, target] of Object.entries(exportsMap)) {
    const field = `exports["${subpath}"]`;
    if (typeof target === "string") {
      ships(target, field);
      if (/\.(m|c)?js$/.test(target) && !shipped.has(declarationOf(target).slice(2))) problems.push(`${field}: "${target}" has no declaration file ${declarationOf(target)} beside it`);
    } else if (target && typeof target === "object") {
      const conditions = Object.entries(target as Record<string, unknown>);
      if (conditions.some(([key]) => key === "types") && conditions[0]?.[0] !== "types") problems.push(`${field}: "types" must be the first condition`);
      if (!conditions.some(([key]) => key === "types")) problems.push(`${field}: has no "types" condition`);
      for (const [condition, value] of conditions) {
        if (typeof value === "string") ships(value, `${field}.${condition}`);
        else problems.push(`${field}.${condition}: must be a path`);
      }
    } else {
      problems.push(`${field}: must be a path or a condition object`);
    }
  }
  const root = exportsMap["."];
  if (root && typeof root === "object") {
    const r = root as Record<string, unknown>;
    if (m.types !== r.types) problems.push(`types: must equal exports["."].types (${JSON.stringify(r.types)})`);
    if (m.main !== r.import) problems.push(`main: must equal exports["."].import (${JSON.stringify(r.import)})`);
  }
  if (typeof m.types === "string") ships(m.types, "types");
  if (typeof m.main === "string") ships(m.main, "main");
  const bins = typeof m.bin === "string" ? { [m.name ?? ""]: m.bin } : (m.bin ?? {});
  for (const [name, target] of Object.entries(bins)) {
    ships(target, `bin.${name}`);
    const file = path.join(pkg.absDir, target);
    if (existsSync(file) && !readFileSync(file, "utf8").startsWith("#!/usr/bin/env node")) problems.push(`bin.${name}: ${target} must start with "#!/usr/bin/env node"`);
  }
  return problems;
}

function declarationOf(target: string): string {
  return target
    .replace(/\.js$/, ".d.ts")
    .replace(/\.mjs$/, ".d.mts")
    .replace(/\.cjs$/, ".d.cts");
}

/** Exact versions; internal packages public and at their current version; no workspace paths. */
function checkDependencies(ctx: PackageContext): string[] {
  const { pkg, all } = ctx;
  const m = pkg.manifest;
  const problems: string[] = [];
  const internal = new Map(all.map((p) => [p.manifest.name ?? p.dir, p]));
  for (const field of ["dependencies", "optionalDependencies"] as const) {
    for (const [name, spec] of Object.entries(m[field] ?? {})) {
      if (!EXACT_VERSION.test(spec)) {
        problems.push(`${field}.${name}: "${spec}" must be an exact version (no ranges, tags, workspace:, file:, link: or URLs)`);
        continue;
      }
      const target = internal.get(name);
      if (target) {
        if (!target.isPublic) problems.push(`${field}.${name}: is a private package (${target.dir}); a published package cannot depend on it`);
        if (target.manifest.version !== spec) problems.push(`${field}.${name}: "${spec}" must be the package's current version ${target.manifest.version}`);
      } else if (!isProviderDir(pkg.dir) && !SHARED_THIRD_PARTY.has(name)) {
        problems.push(
          `${field}.${name}: a shared package may depend only on ${[...SHARED_THIRD_PARTY].join(", ")} outside our scope (vendor SDKs belong to their provider; extend the list in review)`,
        );
      }
    }
  }
  for (const [name, spec] of Object.entries(m.peerDependencies ?? {})) {
    if (internal.has(name)) problems.push(`peerDependencies.${name}: an internal package is a dependency, not a peer`);
    if (/^(workspace|file|link):/.test(spec)) problems.push(`peerDependencies.${name}: "${spec}" is a local path`);
  }
  return problems;
}

/**
 * Minimal and complete: every dependency is imported by shipped code or declarations (a type in the
 * public API needs its package too), every import is declared. A declaration may name a package that
 * a dependency depends on (tsc writes `import("@paperclipai/shared")` for a type it inferred through
 * the SDK): the consumer gets it with that dependency.
 */
function checkDependenciesMatchImports(ctx: PackageContext): string[] {
  const { pkg, packed } = ctx;
  const m = pkg.manifest;
  const runtime = new Set<string>();
  const typesOnly = new Set<string>();
  for (const file of packed) {
    const isJs = /\.(m|c)?js$/.test(file.path) && !/\.d\.(m|c)?ts$/.test(file.path);
    const isDts = /\.d\.(m|c)?ts$/.test(file.path);
    if (!isJs && !isDts) continue;
    for (const name of importedPackages(readFileSync(path.join(pkg.absDir, file.path), "utf8"))) (isJs ? runtime : typesOnly).add(name);
  }
  const declared = new Set([...Object.keys(m.dependencies ?? {}), ...Object.keys(m.optionalDependencies ?? {}), ...Object.keys(m.peerDependencies ?? {})]);
  const viaDependencies = new Set([...declared].flatMap((dep) => Object.keys(ctx.dependenciesOf(dep))));
  const problems: string[] = [];
  for (const name of [...runtime, ...typesOnly].sort()) {
    if (name === m.name || declared.has(name)) continue;
    if (!runtime.has(name) && viaDependencies.has(name)) continue;
    problems.push(`dependencies: shipped ${runtime.has(name) ? "code" : "declarations"} import "${name}", which is not a dependency`);
  }
  for (const name of Object.keys(m.dependencies ?? {}).sort()) {
    if (!runtime.has(name) && !typesOnly.has(name)) problems.push(`dependencies.${name}: nothing shipped imports it (a dependency is needed at run time or by the published types)`);
  }
  return [...new Set(problems)];
}

/** A provider: the host's `paperclipPlugin` entries ship, and the built manifest carries the package's version. */
async function checkPluginEntry(ctx: PackageContext): Promise<string[]> {
  const { pkg, packed } = ctx;
  const m = pkg.manifest;
  const shipped = new Set(packed.map((f) => f.path));
  const problems: string[] = [];
  const entry = m.paperclipPlugin;
  if (!entry?.manifest || !entry.worker) return ["paperclipPlugin: must name the built manifest and worker"];
  for (const key of ["manifest", "worker"] as const) {
    const target = entry[key] ?? "";
    if (!shipped.has(target.replace(/^\.\//, ""))) problems.push(`paperclipPlugin.${key}: "${target}" is not in the tarball`);
  }
  const manifestFile = path.join(pkg.absDir, entry.manifest);
  if (!existsSync(manifestFile)) return [...problems, `paperclipPlugin.manifest: ${entry.manifest} is not built`];
  const manifest = ((await import(pathToFileURL(manifestFile).href)) as { default?: Record<string, unknown> }).default ?? {};
  if (manifest.version !== m.version)
    problems.push(`manifest version ${JSON.stringify(manifest.version)} must be the package version ${m.version} (use packageVersionOf(import.meta.url) from the kit)`);
  const worker = (manifest.entrypoints as { worker?: string } | undefined)?.worker;
  if (path.posix.normalize(worker ?? "") !== path.posix.normalize(entry.worker)) problems.push(`manifest entrypoints.worker ${JSON.stringify(worker)} must be paperclipPlugin.worker ${entry.worker}`);
  return problems;
}

export interface RepositoryContext {
  all: readonly WorkspacePackage[];
  root: PackageManifest;
  /** tsconfig.build.json's reference paths. */
  buildReferences: readonly string[];
  /** .changeset/config.json */
  changesetConfig: { fixed?: string[][]; privatePackages?: { version?: boolean; tag?: boolean } };
}

/** Rules across packages: every package is a workspace and built, providers are public, one version. */
export function checkRepository(ctx: RepositoryContext): string[] {
  const problems: string[] = [];
  const workspaces = new Set(ctx.root.workspaces ?? []);
  const refs = new Set(ctx.buildReferences.map((r) => r.replace(/^\.\//, "").replace(/\/$/, "")));
  const publicOnes = ctx.all.filter((p) => p.isPublic);
  for (const pkg of ctx.all) {
    if (!workspaces.has(pkg.dir)) problems.push(`${pkg.dir}: not in the root package.json workspaces`);
    if (!refs.has(pkg.dir)) problems.push(`${pkg.dir}: not referenced by tsconfig.build.json`);
    if (isProviderDir(pkg.dir) && !pkg.isPublic) problems.push(`${pkg.dir}: a provider must be publishable (no "private")`);
  }
  const versions = new Set(publicOnes.map((p) => p.manifest.version));
  if (versions.size > 1) problems.push(`public packages must share one version (the changesets fixed group): ${publicOnes.map((p) => `${p.manifest.name}@${p.manifest.version}`).join(", ")}`);
  const fixed = ctx.changesetConfig.fixed ?? [];
  if (fixed.length !== 1 || JSON.stringify(fixed[0]) !== JSON.stringify([`${SCOPE}*`])) problems.push(`.changeset/config.json: fixed must be [["${SCOPE}*"]] (one version for every public package)`);
  if (ctx.changesetConfig.privatePackages?.version !== false || ctx.changesetConfig.privatePackages?.tag !== false)
    problems.push(`.changeset/config.json: privatePackages must be { "version": false, "tag": false }`);
  return problems;
}
