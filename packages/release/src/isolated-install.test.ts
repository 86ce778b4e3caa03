import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nodeMeeting } from "./host-node.js";
import { npm } from "./npm.js";
import { releasePack, type PackedPackage } from "./pack.js";
import { listWorkspacePackages } from "./workspace.js";

// Each packed provider installs into an empty folder with plain `npm install` of tarballs (its
// internal dependencies are tarballs too; third-party ones come from the npm cache or registry),
// then loads there with nothing of this repository reachable: the loader and the worker it forks
// run in a bubblewrap jail that mounts the system's /usr and /etc and the install folder only. The
// Node is the package's engines.node choice: ours, or the host's Node 24 when its dependencies need
// more (kubernetes: client-node's undici 8 needs 22.19; the repository overrides it for Node 20).

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const tmp = mkdtempSync(path.join(os.tmpdir(), "release-isolated-"));
const releaseDir = path.join(tmp, "release");
let packed: PackedPackage[] = [];

beforeAll(async () => {
  expect(path.relative(ROOT, tmp).startsWith("..")).toBe(true); // the install folders are outside the repository
  packed = await releasePack({ root: ROOT, outDir: releaseDir });
}, 180_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }), 180_000);

/** The package and every internal package it needs, as tarball paths. */
function tarballsFor(name: string): string[] {
  const byName = new Map(packed.map((p) => [p.name, p]));
  const closure = new Set<string>();
  const add = (n: string) => {
    if (closure.has(n)) return;
    closure.add(n);
    for (const dep of byName.get(n)?.internalDependencies ?? []) add(dep);
  };
  add(name);
  return [...closure].sort().map((n) => path.join(releaseDir, byName.get(n)?.file ?? `missing-${n}`));
}

/** An empty folder outside the repository with `tarballs` installed by npm. */
async function installInEmptyFolder(label: string, tarballs: string[], extraArgs: string[] = []): Promise<string> {
  const dir = path.join(tmp, label);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "package.json"), `${JSON.stringify({ name: `isolated-${label}`, private: true })}\n`);
  await npm(["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...extraArgs, ...tarballs], { cwd: dir, timeoutMs: 300_000 });
  return dir;
}

/** Runs `node` in a jail where only /usr, /etc, `dir` and that binary exist (no network, no repository). */
async function jailedNode(dir: string, args: string[], node = process.execPath): Promise<{ stdout: string; stderr: string }> {
  const nodeBind = node.startsWith("/usr/") ? [] : ["--ro-bind", node, node];
  return run(
    "bwrap",
    [
      "--unshare-all",
      "--die-with-parent",
      "--ro-bind",
      "/usr",
      "/usr",
      "--symlink",
      "usr/lib",
      "/lib",
      "--symlink",
      "usr/lib64",
      "/lib64",
      "--symlink",
      "usr/bin",
      "/bin",
      "--ro-bind",
      "/etc",
      "/etc",
      "--proc",
      "/proc",
      "--dev",
      "/dev",
      "--tmpfs",
      "/tmp",
      "--bind",
      dir,
      dir,
      ...nodeBind,
      "--chdir",
      dir,
      "--clearenv",
      "--setenv",
      "PATH",
      "/usr/bin",
      "--setenv",
      "HOME",
      dir,
      node,
      ...args,
    ],
    { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
  );
}

// The loader: the installed worker client starts the installed provider's worker as the host does.
const LOADER = `
import { existsSync } from "node:fs";
import { loadPluginPackage, startWorker } from "@paperclip-sandbox/worker-client";
const [name, repo] = process.argv.slice(2);
const pkg = await loadPluginPackage(\`node_modules/\${name}\`);
const driverKey = pkg.manifest.environmentDrivers?.[0]?.driverKey;
const client = await startWorker(pkg);
let validation;
try {
  validation = await client.env.validateConfig({ driverKey, config: {} });
} finally {
  await client.shutdown();
}
console.log(JSON.stringify({
  id: pkg.manifest.id, version: pkg.manifest.version, packageVersion: pkg.version, driverKey, worker: pkg.workerPath,
  supportedMethods: client.supportedMethods, validationOk: validation.ok, repoVisible: existsSync(repo),
}));
`;

const providers = listWorkspacePackages(ROOT).filter((p) => p.dir.startsWith("providers/") && p.isPublic);

describe("a packed provider installs and loads on its own", () => {
  it.each(providers.map((p) => [p.manifest.name ?? p.dir, p.manifest.engines?.node]))(
    "%s (engines.node %s)",
    async (name, engines) => {
      const dir = await installInEmptyFolder(name.split("/")[1] ?? name, [...new Set([...tarballsFor(name), ...tarballsFor("@paperclip-sandbox/worker-client")])]);
      writeFileSync(path.join(dir, "load.mjs"), LOADER);
      const { stdout } = await jailedNode(dir, ["load.mjs", name, ROOT], await nodeMeeting(engines));
      const loaded = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>;
      const version = packed.find((p) => p.name === name)?.version;
      expect(loaded).toMatchObject({ version, packageVersion: version, repoVisible: false, worker: path.join(dir, "node_modules", name, "dist", "worker.js") });
      expect(typeof loaded.driverKey).toBe("string");
      expect(loaded.supportedMethods).toContain("environmentValidateConfig");
      expect(typeof loaded.validationOk).toBe("boolean");
    },
    300_000,
  );
});

describe("the packed CLI", () => {
  it("installs on its own and its bin runs", async () => {
    // Install scripts off: better-sqlite3 would compile (no prebuilt binary can be fetched here);
    // help and version never open the lease database.
    const dir = await installInEmptyFolder("cli", tarballsFor("@paperclip-sandbox/cli"), ["--ignore-scripts"]);
    const version = packed.find((p) => p.name === "@paperclip-sandbox/cli")?.version;
    const help = await jailedNode(dir, ["node_modules/.bin/paperclip-sandbox", "--help"]);
    expect(help.stdout).toMatch(/^paperclip-sandbox: try, measure and clean up Paperclip sandbox providers/);
    const shown = await jailedNode(dir, ["node_modules/.bin/paperclip-sandbox", "version"]);
    expect(shown.stdout).toBe(`paperclip-sandbox ${version}\n`);
  }, 300_000);
});
