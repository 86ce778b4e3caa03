#!/usr/bin/env node
// Copy built plugin packages plus exactly their runtime dependency closure into a fresh,
// world-readable tree, so an unprivileged server can load them (CI clones into a folder
// `nobody` may not read). Keeps the repo's relative layout and the workspace symlinks, so
// `node_modules` resolution works as in the repo. A runtime import that a package.json does
// not declare fails here, as it would for an operator who installs the package.
//
// usage: prepare-copy.mjs <repoRoot> <destRoot> <pluginDir>...   (plugin dirs relative to repoRoot)
// Optionally wraps each plugin's worker entry with a JSON-RPC call recorder:
//   E2E_RECORD_DIR=<dir writable by the server user>  (unset: no recorder)
// and, with the recorder, sets the kit's command-channel switch in the worker (a measurement only):
//   E2E_COMMAND_CHANNEL=off|always  (unset: the plugin's default)
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [repoRoot, destRoot, ...pluginDirs] = process.argv.slice(2).map((p, i) => (i < 2 ? path.resolve(p) : p));
if (!repoRoot || !destRoot || pluginDirs.length === 0) {
  console.error("usage: prepare-copy.mjs <repoRoot> <destRoot> <pluginDir>...");
  process.exit(2);
}
const recordDir = process.env.E2E_RECORD_DIR || "";
const commandChannel = process.env.E2E_COMMAND_CHANNEL || "";
if (commandChannel && !recordDir) {
  console.error("[copy] E2E_COMMAND_CHANNEL needs the call recorder (E2E_RECORD_CALLS=1): the recorder's wrapper sets it");
  process.exit(2);
}
const rel = (p) => path.relative(repoRoot, p);
const readJson = (p) => JSON.parse(fs.readFileSync(p, "utf8"));

/** node_modules lookup from `fromDir` upwards, staying inside the repo. Returns the (symlink) path. */
function resolvePackage(name, fromDir) {
  for (let dir = fromDir; dir.startsWith(repoRoot); dir = path.dirname(dir)) {
    const candidate = path.join(dir, "node_modules", name);
    if (fs.existsSync(path.join(candidate, "package.json"))) return candidate;
    if (dir === repoRoot) break;
  }
  return null;
}

const copied = new Set(); // real dirs already copied
const missing = [];
function copyPackage(realDir, isWorkspace) {
  if (copied.has(realDir)) return;
  copied.add(realDir);
  const pkg = readJson(path.join(realDir, "package.json"));
  const dest = path.join(destRoot, rel(realDir));
  fs.mkdirSync(dest, { recursive: true });
  if (isWorkspace) {
    // A workspace package: its manifest, build output and the data folders it ships (its `files`,
    // e.g. a proto/ it reads at run time), not its sources, tests or tsbuildinfo.
    fs.copyFileSync(path.join(realDir, "package.json"), path.join(dest, "package.json"));
    const shipped = (pkg.files ?? []).filter((entry) => !entry.startsWith("!") && !entry.includes("*"));
    for (const entry of new Set(["dist", "README.md", ...shipped])) {
      const src = path.join(realDir, entry);
      if (fs.existsSync(src)) fs.cpSync(src, path.join(dest, entry), { recursive: true, verbatimSymlinks: true });
    }
  } else {
    // A registry package: as installed, minus its own nested node_modules (walked below).
    fs.cpSync(realDir, dest, {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => src === realDir || !path.relative(realDir, src).split(path.sep).includes("node_modules"),
    });
  }
  const deps = { ...pkg.dependencies, ...pkg.optionalDependencies, ...pkg.peerDependencies };
  for (const name of Object.keys(deps)) {
    const found = resolvePackage(name, realDir);
    if (!found) {
      // Optional and peer dependencies may be absent (the SDK's react peer serves only its UI entry).
      const required = pkg.dependencies && name in pkg.dependencies;
      if (required) missing.push(`${pkg.name} -> ${name}`);
      continue;
    }
    linkOrCopy(found);
  }
}

/** Recreate a node_modules entry: a workspace symlink stays a relative symlink; a package is copied. */
function linkOrCopy(entryPath) {
  const stat = fs.lstatSync(entryPath);
  const destEntry = path.join(destRoot, rel(entryPath));
  if (stat.isSymbolicLink()) {
    const real = fs.realpathSync(entryPath);
    if (!real.startsWith(repoRoot + path.sep)) throw new Error(`symlink leaves the repo: ${entryPath} -> ${real}`);
    if (!fs.existsSync(destEntry)) {
      fs.mkdirSync(path.dirname(destEntry), { recursive: true });
      fs.symlinkSync(path.relative(path.dirname(destEntry), path.join(destRoot, rel(real))), destEntry);
    }
    copyPackage(real, !rel(real).split(path.sep).includes("node_modules"));
  } else {
    copyPackage(entryPath, false);
  }
}

fs.mkdirSync(destRoot, { recursive: true });
fs.copyFileSync(path.join(repoRoot, "package.json"), path.join(destRoot, "package.json"));
const plugins = [];
for (const dir of pluginDirs) {
  const real = fs.realpathSync(path.join(repoRoot, dir));
  if (!fs.existsSync(path.join(real, "package.json"))) throw new Error(`no package.json in ${dir}`);
  copyPackage(real, true);
  plugins.push(path.join(destRoot, rel(real)));
}
if (missing.length > 0) {
  console.error(`[copy] runtime dependencies not installed: ${missing.join(", ")}`);
  process.exit(1);
}

// Check every plugin entry exists, then (optionally) wrap the worker with the call recorder.
for (const dir of plugins) {
  const pkg = readJson(path.join(dir, "package.json"));
  const entries = pkg.paperclipPlugin ?? {};
  for (const key of ["manifest", "worker"]) {
    if (!entries[key] || !fs.existsSync(path.join(dir, entries[key]))) {
      console.error(`[copy] ${pkg.name}: paperclipPlugin.${key} (${entries[key]}) is missing: is it built?`);
      process.exit(1);
    }
  }
  const manifest = (await import(pathToFileURL(path.join(dir, entries.manifest)).href)).default;
  const workerRel = manifest?.entrypoints?.worker;
  if (!workerRel || !fs.existsSync(path.join(dir, workerRel))) {
    console.error(`[copy] ${pkg.name}: manifest.entrypoints.worker (${workerRel}) is missing`);
    process.exit(1);
  }
  if (recordDir) {
    const worker = path.join(dir, workerRel);
    const real = worker.replace(/\.(m?js)$/, ".e2e-real.$1");
    fs.renameSync(worker, real);
    const template = fs.readFileSync(new URL("./recorder.mjs", import.meta.url), "utf8");
    fs.writeFileSync(
      worker,
      template
        .replace("__REAL_WORKER__", JSON.stringify(real))
        .replace("__RECORD_FILE__", JSON.stringify(path.join(recordDir, `${manifest.id}.ndjson`)))
        .replace("__COMMAND_CHANNEL__", JSON.stringify(commandChannel)),
    );
  }
  console.log(`${manifest.id}\t${dir}`);
}
