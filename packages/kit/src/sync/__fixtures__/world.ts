import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createTestScriptRunner, type RecordingRunner } from "./local-runner.js";

/**
 * One test's world, all under a fresh temp directory:
 * - `root`: the "sandbox" (the only sync root, and the runner's cwd);
 * - `host`: where host-side sources and targets live;
 * - `outside`: a sentinel directory next to both that nothing may ever write into;
 * - `scratch`: the host scratch directory handed to the sync (so leftovers can be checked);
 * - `sandboxTmp`: the sandbox's TMPDIR (base64 sync-out stages live there).
 */
export interface World {
  base: string;
  root: string;
  host: string;
  outside: string;
  scratch: string;
  sandboxTmp: string;
  runner: RecordingRunner;
  cleanup(): Promise<void>;
}

export async function makeWorld(): Promise<World> {
  // realpath: the sandbox-side check compares physical paths, and tmpdir may be a symlink
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "kit-sync-test-")));
  const world = {
    base,
    root: path.join(base, "sandbox"),
    host: path.join(base, "host"),
    outside: path.join(base, "outside"),
    scratch: path.join(base, "scratch"),
    sandboxTmp: path.join(base, "sandbox-tmp"),
  };
  for (const dir of Object.values(world)) if (dir !== base) await fs.mkdir(dir);
  return {
    ...world,
    runner: createTestScriptRunner(world.root, { TMPDIR: world.sandboxTmp }),
    cleanup: () => fs.rm(base, { recursive: true, force: true }),
  };
}

export async function sha256(file: string): Promise<string> {
  return createHash("sha256")
    .update(await fs.readFile(file))
    .digest("hex");
}

export async function modeOf(file: string): Promise<number> {
  return (await fs.lstat(file)).mode & 0o7777;
}

/** Every entry below `dir` (relative paths, sorted), to assert "nothing written here". */
export async function listTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    for (const entry of await fs.readdir(path.join(dir, rel), { withFileTypes: true })) {
      const child = rel === "" ? entry.name : `${rel}/${entry.name}`;
      out.push(child);
      if (entry.isDirectory()) await walk(child);
    }
  };
  await walk("");
  return out.sort();
}

/** Deterministic pseudo-random bytes (fast, no crypto cost for large fixtures). */
export function pseudoRandomBytes(size: number, seed = 1): Buffer {
  const buf = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf[i] = x & 0xff;
  }
  return buf;
}

/** A world whose host has `target/previous` ("intact"): a sync that must not touch it is checked against it. */
export async function makeWorldWithTarget(): Promise<{ w: World; target: string }> {
  const w = await makeWorld();
  const target = path.join(w.host, "target");
  await fs.mkdir(target);
  await fs.writeFile(path.join(target, "previous"), "intact");
  return { w, target };
}

/**
 * A host tree with an executable (`bin/run`, 0755), a 0600 file (`key`), a file the usual
 * `*.log` exclude drops (`skip.log`) and a relative symlink (`link -> bin/run`).
 */
export async function writeModesTree(w: World, runContent: string | Buffer): Promise<string> {
  const tree = path.join(w.host, "tree");
  await fs.mkdir(path.join(tree, "bin"), { recursive: true });
  await fs.writeFile(path.join(tree, "bin/run"), runContent);
  await fs.chmod(path.join(tree, "bin/run"), 0o755);
  await fs.writeFile(path.join(tree, "key"), "k");
  await fs.chmod(path.join(tree, "key"), 0o600);
  await fs.writeFile(path.join(tree, "skip.log"), "l");
  await fs.symlink("bin/run", path.join(tree, "link"));
  return tree;
}
