/**
 * What a test run may have left on this machine: sandbox directories in its state dir, processes
 * started from them (the keeper's and bwrap's argv name the sandbox directory), per-sandbox socket
 * directories and cgroups.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import { cgroupDirsNamed } from "../jail/cgroups.js";
import { cgroupNameOf, sandboxesDir, socketsDir } from "../store/layout.js";

export async function sandboxLeftovers(stateDir: string, ids: readonly string[] = []): Promise<string[]> {
  const found: string[] = [];
  const leasesDir = sandboxesDir(stateDir);
  for (const name of await fsp.readdir(leasesDir).catch(() => [] as string[])) found.push(`sandbox directory ${name}`);
  for (const name of await fsp.readdir(socketsDir(stateDir)).catch(() => [] as string[])) found.push(`socket directory ${name}`);
  for (const name of await fsp.readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = (await fsp.readFile(`/proc/${name}/cmdline`, "utf8")).split("\0").join(" ");
      const state = (await fsp.readFile(`/proc/${name}/stat`, "utf8")).replace(/^.*\) /s, "").charAt(0);
      if (state !== "Z" && cmdline.includes(`${leasesDir}/`)) found.push(`process ${name}: ${cmdline.slice(0, 120)}`);
    } catch {
      // gone, or not ours
    }
  }
  for (const id of ids) {
    for (const dir of cgroupDirsNamed(cgroupNameOf(stateDir, id))) if (fs.existsSync(dir)) found.push(`cgroup ${dir}`);
  }
  return found;
}
