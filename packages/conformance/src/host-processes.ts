import { readdir, readFile } from "node:fs/promises";

/**
 * Live processes of this machine whose argv contains `needle`, as "pid argv" (zombies left out: they
 * run nothing). Empty where there is no /proc.
 */
export async function hostProcessesWithArgv(needle: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir("/proc");
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = (await readFile(`/proc/${name}/cmdline`, "utf8")).split("\0").join(" ").trim();
      if (!argv.includes(needle)) continue;
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      found.push(`${name} ${argv.slice(0, 200)}`);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}
