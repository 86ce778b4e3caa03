/**
 * Is every user-visible change described? A public package whose published files changed since the
 * last release (the last commit that wrote a CHANGELOG.md, i.e. `changeset version`; before the first
 * release, since the repository began) must be named by a pending changeset in `.changeset/`, so its
 * next version and changelog say what changed. Tests, fixtures and READMEs do not count as changes.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { publicPackages } from "./workspace.js";

/** Package names in a changeset's front matter (`"@scope/name": minor`). */
export function changesetPackages(text: string): string[] {
  const match = /^---\r?\n([\s\S]*?)\r?\n---/.exec(text);
  if (!match) return [];
  const names: string[] = [];
  for (const line of match[1]!.split(/\r?\n/)) {
    const entry = /^\s*["']?([^"':\s]+)["']?\s*:\s*(major|minor|patch|none)\s*$/.exec(line);
    if (entry) names.push(entry[1]!);
  }
  return names;
}

/** Every package some pending changeset names. */
function pendingChangesetPackages(root: string): Set<string> {
  const dir = path.join(root, ".changeset");
  const named = new Set<string>();
  if (!existsSync(dir)) return named;
  for (const file of readdirSync(dir)) {
    if (!file.endsWith(".md") || file === "README.md") continue;
    for (const name of changesetPackages(readFileSync(path.join(dir, file), "utf8"))) named.add(name);
  }
  return named;
}

/** What a package publishes, as opposed to its tests, fixtures and docs. */
export function isPublishedChange(file: string): boolean {
  if (/(^|\/)(__fixtures__|test-support|test)\//.test(file)) return false;
  if (/\.test\.[cm]?[jt]s$/.test(file)) return false;
  if (/\.md$/i.test(file)) return false;
  return /(^|\/)src\//.test(file) || /(^|\/)package\.json$/.test(file) || /(^|\/)bridge\//.test(file);
}

const git = (root: string, args: string[]) => execFileSync("git", args, { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

/** Public packages with a published change since the last release and no pending changeset naming them. */
export function changesetProblems(root: string): string[] {
  const named = pendingChangesetPackages(root);
  let lastRelease = "";
  let changed: string[] | null = null;
  try {
    lastRelease = git(root, ["log", "-1", "--format=%H", "--", "*CHANGELOG.md"]);
    changed = lastRelease ? git(root, ["diff", "--name-only", lastRelease, "HEAD"]).split("\n").filter(Boolean) : null;
  } catch {
    changed = null; // not a git checkout: every package counts as changed
  }
  const problems: string[] = [];
  for (const pkg of publicPackages(root)) {
    const name = String(pkg.manifest.name);
    if (named.has(name)) continue;
    const touched = changed === null || changed.some((file) => file.startsWith(`${pkg.dir}/`) && isPublishedChange(file.slice(pkg.dir.length + 1)));
    if (!touched) continue;
    const since = lastRelease ? `since the last release (${lastRelease.slice(0, 12)})` : "and it has never been released";
    problems.push(`${name} (${pkg.dir}) changed ${since}, but no changeset in .changeset/ names it: run \`npx changeset\` and describe the change`);
  }
  return problems;
}
