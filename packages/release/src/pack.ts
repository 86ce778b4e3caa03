import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { formatChecksums, sha256File } from "./checksums.js";
import { mapLimit } from "./map-limit.js";
import { npmPack, type PackResult } from "./npm.js";
import { inDependencyOrder, publicPackages, type PackageManifest } from "./workspace.js";

export const CHECKSUMS_FILE = "SHA256SUMS";
export const INDEX_FILE = "release.json";
/** npm runs at once while packing (each is mostly Node start-up). */
const PACK_CONCURRENCY = 3;

export interface PackedPackage {
  name: string;
  version: string;
  /** Repository-relative folder of the package. */
  dir: string;
  /** Tarball file name inside the output folder. */
  file: string;
  sha256: string;
  integrity: string;
  /** Internal packages it depends on (publish those first). */
  internalDependencies: string[];
}

export interface ReleasePackOptions {
  root: string;
  outDir: string;
}

/**
 * Packs every public package, as built, into `outDir` (its earlier tarballs, checksum list and
 * index are replaced; nothing else there is touched) and writes `SHA256SUMS` and `release.json`,
 * the packages in publish order. npm pack writes every entry with one fixed mtime and in a fixed
 * order; modes are fixed here, so the same commit gives the same bytes.
 */
export async function releasePack(opts: ReleasePackOptions): Promise<PackedPackage[]> {
  const outDir = path.resolve(opts.outDir);
  mkdirSync(outDir, { recursive: true });
  for (const entry of readdirSync(outDir)) {
    if (entry.endsWith(".tgz") || entry === CHECKSUMS_FILE || entry === INDEX_FILE) rmSync(path.join(outDir, entry));
  }
  const packages = inDependencyOrder(publicPackages(opts.root));
  const publicNames = new Set(packages.map((p) => p.manifest.name));
  // npm pack writes into a private staging folder, then the tarball moves: a half-written file
  // never sits in the output folder.
  const staging = path.join(os.tmpdir(), `release-pack-${process.pid}-${Date.now()}`);
  try {
    const packed = await mapLimit(packages, PACK_CONCURRENCY, async (pkg): Promise<PackedPackage> => {
      const result = await packNormalized(pkg.absDir, pkg.manifest, path.join(staging, pkg.dir));
      const target = path.join(outDir, result.filename);
      renameSync(result.tarball, target);
      return {
        name: result.name,
        version: result.version,
        dir: pkg.dir,
        file: result.filename,
        sha256: sha256File(target),
        integrity: result.integrity,
        internalDependencies: Object.keys({ ...pkg.manifest.dependencies, ...pkg.manifest.optionalDependencies, ...pkg.manifest.peerDependencies })
          .filter((name) => publicNames.has(name))
          .sort(),
      };
    });
    writeFileSync(path.join(outDir, CHECKSUMS_FILE), formatChecksums(packed));
    writeFileSync(path.join(outDir, INDEX_FILE), `${JSON.stringify({ packages: packed }, null, 2)}\n`);
    return packed;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/**
 * npm pack of a copy of what npm would pack from `dir`, every file 0644 and every bin 0755, in
 * `work` (created; the tarball is left there): a tarball records modes, and a working tree's modes
 * depend on its history (npm's bin linking makes a bin target executable), not on the commit.
 */
export async function packNormalized(dir: string, manifest: PackageManifest, work: string): Promise<PackResult & { tarball: string }> {
  const listed = await npmPack(dir);
  const bins = new Set(Object.values(typeof manifest.bin === "string" ? { bin: manifest.bin } : (manifest.bin ?? {})).map((b) => path.posix.normalize(b)));
  const copy = path.join(work, "package");
  for (const file of listed.files) {
    const target = path.join(copy, file.path);
    mkdirSync(path.dirname(target), { recursive: true });
    copyFileSync(path.join(dir, file.path), target);
    chmodSync(target, bins.has(path.posix.normalize(file.path)) ? 0o755 : 0o644);
  }
  const result = await npmPack(copy, work);
  return { ...result, tarball: path.join(work, result.filename) };
}

/** The index `releasePack` wrote, or an error naming what is missing. */
export function readReleaseIndex(outDir: string): PackedPackage[] {
  const file = path.join(outDir, INDEX_FILE);
  if (!existsSync(file)) throw new Error(`${file} not found: run npm run release:pack first`);
  return (JSON.parse(readFileSync(file, "utf8")) as { packages: PackedPackage[] }).packages;
}
