/**
 * Reading a small file of a sandbox's disk from the host, whatever the sandbox's state (also
 * stopped, when there is no jail to ask). Sandboxed code owns everything below the bound
 * directories and may have planted links there, so every component is opened relative to the one
 * before it (/proc/self/fd/N/<name>, like openat) without following links: a link anywhere on the
 * way, or swapped in meanwhile, makes the read come back empty instead of leaving the sandbox.
 */
import fsp from "node:fs/promises";
import { constants } from "node:fs";

const DIRECTORY = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const NOT_THERE = new Set(["ENOENT", "ELOOP", "ENOTDIR", "EACCES", "ENXIO"]);

/** The bytes of `relativePath` under `baseDir`, or null when missing, behind a link, not a regular file, or over `maxBytes`. */
export async function readFileNoFollow(baseDir: string, relativePath: string, maxBytes: number): Promise<Buffer | null> {
  const parts = relativePath.split("/").filter(Boolean);
  if (parts.length === 0 || parts.some((part) => part === "." || part === "..")) throw new Error(`not a plain relative path: ${relativePath}`);
  const opened: fsp.FileHandle[] = [];
  try {
    let dir = await fsp.open(baseDir, DIRECTORY);
    opened.push(dir);
    for (const part of parts.slice(0, -1)) {
      dir = await fsp.open(`/proc/self/fd/${dir.fd}/${part}`, DIRECTORY);
      opened.push(dir);
    }
    const file = await fsp.open(`/proc/self/fd/${dir.fd}/${parts.at(-1)}`, FILE);
    opened.push(file);
    const stat = await file.stat();
    if (!stat.isFile() || stat.size > maxBytes) return null;
    const buffer = Buffer.alloc(stat.size);
    const { bytesRead } = await file.read(buffer, 0, stat.size, 0);
    return buffer.subarray(0, bytesRead);
  } catch (error) {
    if (NOT_THERE.has((error as NodeJS.ErrnoException).code ?? "")) return null;
    throw error;
  } finally {
    for (const handle of opened.reverse()) await handle.close().catch(() => undefined);
  }
}
