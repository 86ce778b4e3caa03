import { access, readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { PaperclipPluginManifestV1 } from "@paperclipai/plugin-sdk";

export interface PluginPackage {
  dir: string;
  name: string;
  version: string;
  manifestPath: string;
  workerPath: string;
  manifest: PaperclipPluginManifestV1;
}

/**
 * Resolve a plugin package the way the Paperclip loader does: `package.json` →
 * `paperclipPlugin.{manifest,worker}` (paths relative to the package), manifest = default export.
 */
export async function loadPluginPackage(dir: string): Promise<PluginPackage> {
  const packageDir = path.resolve(dir);
  const packageJsonPath = path.join(packageDir, "package.json");
  const packageJson = await readPackageJson(packageJsonPath);

  const entry = packageJson.paperclipPlugin;
  if (!isRecord(entry)) {
    throw new Error(`${packageJsonPath}: missing "paperclipPlugin" object with "manifest" and "worker" paths`);
  }
  const manifestRel = requireString(entry, "manifest", packageJsonPath);
  const workerRel = requireString(entry, "worker", packageJsonPath);
  const manifestPath = path.resolve(packageDir, manifestRel);
  const workerPath = path.resolve(packageDir, workerRel);
  await requireBuiltFile(manifestPath, "paperclipPlugin.manifest", packageDir);
  await requireBuiltFile(workerPath, "paperclipPlugin.worker", packageDir);

  const manifestModule = (await import(pathToFileURL(manifestPath).href)) as { default?: unknown };
  const manifest = manifestModule.default;
  if (!isRecord(manifest) || typeof manifest.id !== "string") {
    throw new Error(`${manifestPath}: default export is not a plugin manifest (expected an object with an "id")`);
  }

  return {
    dir: packageDir,
    name: typeof packageJson.name === "string" ? packageJson.name : path.basename(packageDir),
    version: typeof packageJson.version === "string" ? packageJson.version : "0.0.0",
    manifestPath,
    workerPath,
    manifest: manifest as unknown as PaperclipPluginManifestV1,
  };
}

async function readPackageJson(file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    throw new Error(`${file}: not found (is this a plugin package directory?)`);
  }
  const parsed: unknown = JSON.parse(text);
  if (!isRecord(parsed)) throw new Error(`${file}: not a JSON object`);
  return parsed;
}

function requireString(entry: Record<string, unknown>, key: string, file: string): string {
  const value = entry[key];
  if (typeof value !== "string" || value.length === 0) {
    throw new Error(`${file}: missing "paperclipPlugin.${key}" path`);
  }
  return value;
}

async function requireBuiltFile(file: string, key: string, packageDir: string): Promise<void> {
  try {
    await access(file);
  } catch {
    throw new Error(`${key} points at ${file}, which does not exist: run npm run build (in ${packageDir} or the repo root)`);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
