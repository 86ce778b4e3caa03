import { execFile } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { npm } from "./npm.js";
import { nodeSatisfies } from "./node-engine.js";

const run = promisify(execFile);

/** The Node major the Paperclip host runs (it needs >= 24.11). */
const HOST_NODE_MAJOR = 24;

/**
 * A Node binary meeting `engines` (">=X.Y.Z"): this process's own when it does, else the host's
 * Node (npm package node@24, installed once into a cache folder and reused). A package whose
 * dependencies need a newer Node than ours is loaded as the host would load it.
 */
export async function nodeMeeting(engines: string | undefined): Promise<string> {
  if (nodeSatisfies(engines)) return process.execPath;
  const node = await hostNode();
  const { stdout } = await run(node, ["-p", "process.versions.node"]);
  if (!nodeSatisfies(engines, stdout.trim())) throw new Error(`engines.node ${engines}: not met by this Node ${process.versions.node} nor the host's Node ${stdout.trim()}`);
  return node;
}

/** Node 24 from npm, cached (the e2e's cache folder when it is writable, else ~/.cache). */
async function hostNode(): Promise<string> {
  const dir = path.join(cacheRoot(), `node${HOST_NODE_MAJOR}`);
  const binary = path.join(dir, "node_modules", "node", "bin", "node");
  if (existsSync(path.join(dir, ".complete"))) return binary;
  mkdirSync(path.dirname(dir), { recursive: true });
  // Installed beside its final place and renamed in, so a half-done install is never reused.
  const staging = mkdtempSync(`${dir}.tmp-`);
  try {
    writeFileSync(path.join(staging, "package.json"), `${JSON.stringify({ name: "host-node", private: true })}\n`);
    await npm(["install", "--no-audit", "--no-fund", "--loglevel=error", `node@${HOST_NODE_MAJOR}`], { cwd: staging, timeoutMs: 300_000 });
    writeFileSync(path.join(staging, ".complete"), "");
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return binary;
}

function cacheRoot(): string {
  const shared = process.env.PAPERCLIP_E2E_CACHE ?? "/var/cache/paperclip-sandbox-e2e";
  try {
    mkdirSync(shared, { recursive: true });
    accessSync(shared, constants.W_OK);
    return shared;
  } catch {
    return path.join(os.homedir(), ".cache", "paperclip-sandbox");
  }
}
