import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { checkAll } from "./check.js";
import { checkPublicPackage, checkRepository, NODE_ENGINE } from "./rules.js";
import type { PackageManifest, WorkspacePackage } from "./workspace.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const LICENSE_TEXT = readFileSync(path.join(ROOT, "LICENSE"), "utf8");

describe("the repository's packages", () => {
  // Walks every packages/*, providers/* and emulators/* package.json and packs each public one with
  // npm (dry run): a provider that lands without following docs/PUBLISHING.md fails here.
  it("follow every publishing rule", async () => {
    expect(await checkAll(ROOT)).toEqual([]);
  }, 180_000);
});

// ---------------------------------------------------------------- each rule fails on its violation
const tmp = mkdtempSync(path.join(os.tmpdir(), "release-rules-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let counter = 0;

const goodKit: PackageManifest = {
  name: "@paperclip-sandbox/kit",
  version: "1.2.3",
  description: "The shared kit of the providers.",
  license: "MIT",
  type: "module",
  main: "./dist/index.js",
  types: "./dist/index.d.ts",
  exports: { ".": { types: "./dist/index.d.ts", import: "./dist/index.js" } },
  files: ["dist", "README.md", "LICENSE"],
  engines: { node: NODE_ENGINE },
  publishConfig: { access: "public" },
  dependencies: { zod: "4.6.7" },
};
const goodProvider: PackageManifest = {
  ...goodKit,
  name: "@paperclip-sandbox/plugin-thing",
  description: "A provider for tests.",
  paperclipPlugin: { manifest: "./dist/manifest.js", worker: "./dist/worker.js" },
  dependencies: { "@paperclip-sandbox/kit": "1.2.3", "vendor-sdk": "3.0.0" },
};

/** A package folder with its files written; `packed` is what npm would put in the tarball. */
function fixture(dir: string, manifest: PackageManifest, files: Record<string, string>): WorkspacePackage {
  const absDir = path.join(tmp, String(counter++), dir);
  const all = { "package.json": JSON.stringify(manifest), "README.md": "# x\n", LICENSE: LICENSE_TEXT, ...files };
  for (const [rel, text] of Object.entries(all)) {
    mkdirSync(path.dirname(path.join(absDir, rel)), { recursive: true });
    writeFileSync(path.join(absDir, rel), text);
  }
  return { dir, absDir, manifest, isPublic: manifest.private !== true };
}
const KIT_FILES = { "dist/index.js": 'import { z } from "zod";\nexport const x = z;\n', "dist/index.d.ts": "export declare const x: unknown;\n" };
const providerFiles = (version: string, worker = "./dist/worker.js") => ({
  "dist/index.js": 'export * from "./manifest.js";\n',
  "dist/index.d.ts": "export {};\n",
  "dist/manifest.js": `export default { id: "t", version: ${JSON.stringify(version)}, entrypoints: { worker: ${JSON.stringify(worker)} } };\n`,
  "dist/worker.js": 'import { defineSandboxProvider } from "@paperclip-sandbox/kit";\nimport { Client } from "vendor-sdk";\nexport { defineSandboxProvider, Client };\n',
});

async function problemsOf(pkg: WorkspacePackage, others: WorkspacePackage[] = [], extraPacked: string[] = [], omit: string[] = []): Promise<string[]> {
  const files = Object.keys({ ...(pkg.dir.startsWith("providers/") ? providerFiles("") : KIT_FILES), "package.json": "", "README.md": "", LICENSE: "" });
  const packed = [...files, ...extraPacked].filter((f) => !omit.includes(f)).map((p) => ({ path: p, size: 1, mode: 0o644 }));
  for (const extra of extraPacked) {
    mkdirSync(path.dirname(path.join(pkg.absDir, extra)), { recursive: true });
    writeFileSync(path.join(pkg.absDir, extra), "");
  }
  return checkPublicPackage({ pkg, all: [pkg, ...others], packed, rootLicense: LICENSE_TEXT, dependenciesOf: () => ({}) });
}

describe("checkPublicPackage", () => {
  it("passes a well-formed shared package and a well-formed provider", async () => {
    const kit = fixture("packages/kit", goodKit, KIT_FILES);
    expect(await problemsOf(kit)).toEqual([]);
    const provider = fixture("providers/thing", goodProvider, providerFiles("1.2.3"));
    expect(await problemsOf(provider, [kit])).toEqual([]);
  });

  it("refuses ranges, workspace paths, private and stale internal dependencies", async () => {
    const kit = fixture("packages/kit", goodKit, KIT_FILES);
    const hidden = fixture("emulators/hidden", { ...goodKit, name: "@paperclip-sandbox/emulator-hidden", private: true }, KIT_FILES);
    const bad = fixture(
      "providers/thing",
      { ...goodProvider, dependencies: { "@paperclip-sandbox/kit": "1.2.0", "vendor-sdk": "^3.0.0", "@paperclip-sandbox/emulator-hidden": "1.2.3", zod: "workspace:*" } },
      providerFiles("1.2.3"),
    );
    const problems = (await problemsOf(bad, [kit, hidden])).join("\n");
    expect(problems).toContain('dependencies.vendor-sdk: "^3.0.0" must be an exact version');
    expect(problems).toContain('dependencies.zod: "workspace:*" must be an exact version');
    expect(problems).toContain('dependencies.@paperclip-sandbox/kit: "1.2.0" must be the package\'s current version 1.2.3');
    expect(problems).toContain("dependencies.@paperclip-sandbox/emulator-hidden: is a private package (emulators/hidden)");
  });

  it("keeps a vendor SDK out of shared packages", async () => {
    const kit = fixture(
      "packages/kit",
      { ...goodKit, dependencies: { zod: "4.6.7", "vendor-sdk": "3.0.0" } },
      {
        ...KIT_FILES,
        "dist/index.js": 'import { z } from "zod";\nimport "vendor-sdk";\nexport const x = z;\n',
      },
    );
    expect((await problemsOf(kit)).join("\n")).toContain("dependencies.vendor-sdk: a shared package may depend only on");
  });

  it("refuses an undeclared import and a dependency nothing imports", async () => {
    const kit = fixture(
      "packages/kit",
      { ...goodKit, dependencies: { zod: "4.6.7", tar: "7.5.23" } },
      {
        ...KIT_FILES,
        "dist/index.js": 'import { z } from "zod";\nimport { parse } from "yaml";\nconst argv = ["--files-from", "-"];\nexport const x = [z, parse, argv];\n',
      },
    );
    const problems = (await problemsOf(kit)).join("\n");
    expect(problems).toContain('shipped code import "yaml", which is not a dependency');
    expect(problems).toContain("dependencies.tar: nothing shipped imports it");
    expect(problems).not.toContain('"-"'); // a string after "from" inside code is not an import
  });

  it("refuses sources, maps, build state and tests in the tarball, and a missing LICENSE", async () => {
    const kit = fixture("packages/kit", goodKit, KIT_FILES);
    const problems = (await problemsOf(kit, [], ["dist/index.js.map", "src/index.ts", "dist/.tsbuildinfo", "dist/a.test.js"], ["LICENSE"])).join("\n");
    expect(problems).toContain("tarball: ships dist/index.js.map (source map");
    expect(problems).toContain("tarball: ships src/index.ts (only dist/");
    expect(problems).toContain("tarball: ships src/index.ts (TypeScript source)");
    expect(problems).toContain("tarball: ships dist/.tsbuildinfo (tsc build state)");
    expect(problems).toContain("tarball: ships dist/a.test.js (test file)");
    expect(problems).toContain("tarball: has no LICENSE");
  });

  it("checks exports, types, license, engines, scope and access", async () => {
    const kit = fixture(
      "packages/kit",
      {
        ...goodKit,
        name: "@other/kit",
        license: "ISC",
        engines: { node: ">=18" },
        publishConfig: {},
        types: "./dist/other.d.ts",
        exports: { ".": { import: "./dist/index.js", types: "./dist/index.d.ts" }, "./extra": "./dist/extra.js" },
      },
      KIT_FILES,
    );
    const problems = (await problemsOf(kit)).join("\n");
    for (const expected of [
      "name: must be in the @paperclip-sandbox/ scope",
      'license: must be "MIT"',
      `engines.node: must be "${NODE_ENGINE}" or a higher ">=X.Y.Z", got ">=18"`,
      'publishConfig.access: must be "public"',
      'exports["."]: "types" must be the first condition',
      'exports["./extra"]: "./dist/extra.js" is not in the tarball',
      'exports["./extra"]: "./dist/extra.js" has no declaration file ./dist/extra.d.ts beside it',
      'types: must equal exports["."].types',
      'types: "./dist/other.d.ts" is not in the tarball',
    ])
      expect(problems).toContain(expected);
  });

  it("takes a higher engines.node minimum, and refuses a lower one or another form", async () => {
    for (const [node, ok] of [
      [">=22.19.0", true],
      [">=20.3.0", true],
      [">=20.2.9", false],
      ["^22.0.0", false],
      [">=22", false],
    ] as const) {
      const kit = fixture("packages/kit", { ...goodKit, engines: { node } }, KIT_FILES);
      const problems = (await problemsOf(kit)).filter((p) => p.includes("engines.node"));
      expect(problems.length === 0, `${node}: ${problems.join("; ")}`).toBe(ok);
    }
  });

  it("names a provider after the host's plugin pattern and keeps its manifest version in step", async () => {
    const kit = fixture("packages/kit", goodKit, KIT_FILES);
    const provider = fixture("providers/thing", { ...goodProvider, name: "@paperclip-sandbox/thing" }, providerFiles("0.0.9", "./dist/other.js"));
    const problems = (await problemsOf(provider, [kit])).join("\n");
    expect(problems).toContain("name: a provider is named @paperclip-sandbox/plugin-<name>");
    expect(problems).toContain('manifest version "0.0.9" must be the package version 1.2.3');
    expect(problems).toContain('manifest entrypoints.worker "./dist/other.js" must be paperclipPlugin.worker ./dist/worker.js');
  });
});

describe("checkRepository", () => {
  it("wants every package in the workspaces and the build, providers public, one version, the fixed group", () => {
    const pkg = (dir: string, m: PackageManifest): WorkspacePackage => ({ dir, absDir: dir, manifest: m, isPublic: m.private !== true });
    const problems = checkRepository({
      all: [
        pkg("packages/kit", { name: "@paperclip-sandbox/kit", version: "1.0.0" }),
        pkg("providers/x", { name: "@paperclip-sandbox/plugin-x", version: "1.1.0", private: true }),
        pkg("packages/cli", { name: "@paperclip-sandbox/cli", version: "1.1.0" }),
      ],
      root: { workspaces: ["packages/kit", "providers/x"] },
      buildReferences: ["packages/kit", "packages/cli"],
      changesetConfig: { fixed: [], privatePackages: { version: true } },
    });
    expect(problems).toEqual([
      "providers/x: not referenced by tsconfig.build.json",
      'providers/x: a provider must be publishable (no "private")',
      "packages/cli: not in the root package.json workspaces",
      "public packages must share one version (the changesets fixed group): @paperclip-sandbox/kit@1.0.0, @paperclip-sandbox/cli@1.1.0",
      '.changeset/config.json: fixed must be [["@paperclip-sandbox/*"]] (one version for every public package)',
      '.changeset/config.json: privatePackages must be { "version": false, "tag": false }',
    ]);
  });
});
