import { readdir, readFile, readlink, stat } from "node:fs/promises";
import path from "node:path";
import type { LeftoversContext } from "./options.js";

/**
 * Leftovers of a provider whose sandboxes live on this machine: any lease working directory
 * that still exists, and any live process whose cwd is (or was) inside one. Needs Linux /proc
 * for the process part; elsewhere only directories are checked.
 */
export async function findLocalLeftovers(context: LeftoversContext): Promise<string[]> {
  const found: string[] = [];
  for (const dir of context.remoteCwds) {
    if (await exists(dir)) found.push(`directory ${dir}`);
  }
  for (const { pid, cwd } of await liveProcessCwds()) {
    if (context.remoteCwds.some((dir) => cwd === dir || cwd.startsWith(`${dir}${path.sep}`))) {
      found.push(`process ${pid} (cwd ${cwd})`);
    }
  }
  return found;
}

async function liveProcessCwds(): Promise<Array<{ pid: number; cwd: string }>> {
  let entries: string[];
  try {
    entries = await readdir("/proc");
  } catch {
    return [];
  }
  const result: Array<{ pid: number; cwd: string }> = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const state = (await readFile(`/proc/${entry}/stat`, "utf8")).replace(/^.*\) /s, "").charAt(0);
      if (state === "Z") continue; // a zombie holds no resources worth reporting
      // A removed directory reads back as "<path> (deleted)".
      const cwd = (await readlink(`/proc/${entry}/cwd`)).replace(/ \(deleted\)$/, "");
      result.push({ pid: Number(entry), cwd });
    } catch {
      // Gone meanwhile, or not ours to inspect.
    }
  }
  return result;
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}
