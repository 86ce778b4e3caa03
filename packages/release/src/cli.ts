#!/usr/bin/env node
// Release tooling entry point (run from the repository root, after `npm run build`):
//   node packages/release/dist/cli.js pack [--out DIR]        pack every public package (npm run release:pack)
//   node packages/release/dist/cli.js check                   the publishing rules (docs/PUBLISHING.md)
//   node packages/release/dist/cli.js check-reproducible      pack, clean build, pack again: same checksums?
//   node packages/release/dist/cli.js check-lockfile          package-lock.json agrees with every package.json
//   node packages/release/dist/cli.js check-changesets        every changed public package is named by a changeset
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { changesetProblems } from "./changesets.js";
import { checkAll } from "./check.js";
import { lockfileProblems } from "./lockfile.js";
import { npm } from "./npm.js";
import { CHECKSUMS_FILE, releasePack } from "./pack.js";
import { compareChecksumLists } from "./reproducible.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({ args: argv, allowPositionals: true, options: { out: { type: "string" } } });
  const [command] = positionals;
  if (command === "pack") {
    const outDir = path.resolve(values.out ?? path.join(ROOT, "release"));
    const packed = await releasePack({ root: ROOT, outDir });
    for (const p of packed) console.log(`${p.sha256}  ${p.file}`);
    console.log(`${packed.length} packages in ${outDir} (${CHECKSUMS_FILE}, release.json)`);
    return 0;
  }
  if (command === "check") {
    const problems = await checkAll(ROOT);
    for (const p of problems) console.log(p);
    console.log(problems.length === 0 ? "every package follows the publishing rules" : `${problems.length} problems`);
    return problems.length === 0 ? 0 : 1;
  }
  if (command === "check-lockfile") {
    const problems = lockfileProblems(ROOT);
    for (const p of problems) console.log(p);
    console.log(problems.length === 0 ? "package-lock.json agrees with every workspace's package.json" : `${problems.length} problems`);
    return problems.length === 0 ? 0 : 1;
  }
  if (command === "check-changesets") {
    const problems = changesetProblems(ROOT);
    for (const p of problems) console.log(p);
    console.log(problems.length === 0 ? "every changed public package is named by a pending changeset" : `${problems.length} problems`);
    return problems.length === 0 ? 0 : 1;
  }
  if (command === "check-reproducible") {
    const tmp = mkdtempSync(path.join(os.tmpdir(), "release-repro-"));
    try {
      await releasePack({ root: ROOT, outDir: path.join(tmp, "a") });
      // Rebuild from nothing: a clean build of the same commit must pack to the same bytes.
      await npm(["run", "clean", "--silent"], { cwd: ROOT, timeoutMs: 300_000 });
      await npm(["run", "build", "--silent"], { cwd: ROOT, timeoutMs: 900_000 });
      await releasePack({ root: ROOT, outDir: path.join(tmp, "b") });
      const read = (d: string) => readFileSync(path.join(tmp, d, CHECKSUMS_FILE), "utf8");
      const diff = compareChecksumLists(read("a"), read("b"));
      process.stdout.write(read("b"));
      for (const d of diff) console.log(`DIFFERS ${d}`);
      console.log(diff.length === 0 ? "reproducible: a clean rebuild packs to the same checksums" : `${diff.length} tarballs differ`);
      return diff.length === 0 ? 0 : 1;
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  console.error("usage: cli.js pack [--out DIR] | check | check-reproducible | check-lockfile | check-changesets");
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
