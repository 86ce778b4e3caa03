/**
 * What a bubblewrap test run may have left on this machine: lease directories in its state dir,
 * processes started from them (bwrap's argv names the lease directory), and per-lease cgroups.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";

export async function bubblewrapLeftovers(stateDir: string, leaseIds: readonly string[] = []): Promise<string[]> {
  const found: string[] = [];
  const leasesDir = path.join(stateDir, "leases");
  for (const name of await fsp.readdir(leasesDir).catch(() => [] as string[])) found.push(`lease directory ${name}`);
  for (const name of await fsp.readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = (await fsp.readFile(`/proc/${name}/cmdline`, "utf8")).split("\0").join(" ");
      const state = (await fsp.readFile(`/proc/${name}/stat`, "utf8")).replace(/^.*\) /s, "").charAt(0);
      if (state !== "Z" && cmdline.includes(leasesDir)) found.push(`process ${name}: ${cmdline.slice(0, 120)}`);
    } catch {
      // gone, or not ours
    }
  }
  for (const controller of ["memory", "pids", "cpu"]) {
    const root = path.join("/sys/fs/cgroup", controller);
    if (!fs.existsSync(root)) continue;
    for (const leaseId of leaseIds) {
      const hits = await findDirs(root, `paperclip-bwrap-${leaseId}`, 3);
      for (const hit of hits) found.push(`cgroup ${hit}`);
    }
  }
  return found;
}

async function findDirs(root: string, name: string, depth: number): Promise<string[]> {
  if (depth < 0) return [];
  const hits: string[] = [];
  const entries = await fsp.readdir(root, { withFileTypes: true }).catch(() => [] as fs.Dirent[]);
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const full = path.join(root, entry.name);
    if (entry.name === name) hits.push(full);
    else hits.push(...(await findDirs(full, name, depth - 1)));
  }
  return hits;
}
