/** The state directory and the per-sandbox directories in it. */
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { SandboxExistsError } from "../errors.js";
import { sandboxesDir, socketsDir, type SandboxLayout } from "./layout.js";

/**
 * Creates (or checks) the state directory: 0700 and owned by us, because it may sit in a shared
 * sticky directory where another user could have planted it or a symlink in its place.
 */
export async function ensureStateDir(stateDir: string): Promise<void> {
  await fsp.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const stat = await fsp.lstat(stateDir);
  const uid = process.getuid?.() ?? 0;
  if (!stat.isDirectory()) throw new Error(`state directory ${stateDir} is not a directory`);
  if (stat.uid !== uid) throw new Error(`state directory ${stateDir} is owned by uid ${stat.uid}, not by this worker (uid ${uid})`);
  if ((stat.mode & 0o077) !== 0) await fsp.chmod(stateDir, 0o700);
  await fsp.mkdir(sandboxesDir(stateDir), { recursive: true, mode: 0o700 });
  await fsp.mkdir(socketsDir(stateDir), { recursive: true, mode: 0o700 });
}

/** Creates a new sandbox's directories; EEXIST (SandboxExistsError) when the id is taken. */
export async function createSandboxDirs(layout: SandboxLayout, id: string, etcFiles: Record<string, string>): Promise<void> {
  try {
    await fsp.mkdir(layout.dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") throw new SandboxExistsError(`a sandbox with id ${id} already exists`);
    throw error;
  }
  await Promise.all([layout.workspace, layout.home, layout.cache, layout.tmp, layout.etc].map((dir) => fsp.mkdir(dir, { mode: 0o700 })));
  // The sandbox's /tmp is shared by every process of the sandbox, as on a normal host.
  await fsp.chmod(layout.tmp, 0o1777);
  await Promise.all(Object.entries(etcFiles).map(([name, text]) => fsp.writeFile(path.join(layout.etc, name), text, { mode: 0o644 })));
  await fsp.rm(layout.socketDir, { recursive: true, force: true });
  await fsp.mkdir(layout.egress, { recursive: true, mode: 0o700 });
}

/**
 * Removes a sandbox tree even when the sandbox left unreadable or unwritable directories in it (the
 * sandbox user is this worker's uid, so it can always restore the permission bits first).
 */
export async function removeTree(dir: string): Promise<void> {
  try {
    await fsp.rm(dir, { recursive: true, force: true, maxRetries: 2 });
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "EACCES" && code !== "EPERM" && code !== "ENOTEMPTY") throw error;
  }
  await restoreOwnerPermissions(dir);
  await fsp.rm(dir, { recursive: true, force: true, maxRetries: 2 });
}

async function restoreOwnerPermissions(dir: string): Promise<void> {
  try {
    await fsp.chmod(dir, 0o700);
  } catch {
    return;
  }
  let entries: fs.Dirent[];
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    if (entry.isDirectory()) await restoreOwnerPermissions(path.join(dir, entry.name));
  }
}
