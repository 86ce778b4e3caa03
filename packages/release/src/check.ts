import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { mapLimit } from "./map-limit.js";
import { npmPack } from "./npm.js";
import { checkPublicPackage, checkRepository } from "./rules.js";
import { listWorkspacePackages, readManifest } from "./workspace.js";

/** Every publishing rule over the repository at `root` (it must be built): the problems found. */
export async function checkAll(root: string): Promise<string[]> {
  const all = listWorkspacePackages(root);
  const tsconfig = JSON.parse(readFileSync(path.join(root, "tsconfig.build.json"), "utf8")) as { references?: Array<{ path: string }> };
  const changesetFile = path.join(root, ".changeset", "config.json");
  const problems = checkRepository({
    all,
    root: readManifest(path.join(root, "package.json")),
    buildReferences: (tsconfig.references ?? []).map((r) => r.path),
    changesetConfig: existsSync(changesetFile) ? (JSON.parse(readFileSync(changesetFile, "utf8")) as object) : {},
  });
  const rootLicense = readFileSync(path.join(root, "LICENSE"), "utf8");
  const dependenciesOf = (name: string): Record<string, string> => {
    const file = path.join(root, "node_modules", ...name.split("/"), "package.json");
    return existsSync(file) ? (readManifest(file).dependencies ?? {}) : {};
  };
  const perPackage = await mapLimit(
    all.filter((p) => p.isPublic),
    3,
    async (pkg) => {
      const packed = await npmPack(pkg.absDir);
      return checkPublicPackage({ pkg, all, packed: packed.files, rootLicense, dependenciesOf });
    },
  );
  return [...problems, ...perPackage.flat()];
}
