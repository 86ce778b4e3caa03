import { readdirSync, readFileSync } from "node:fs";
import { killProcessGroup } from "./process-group.js";

/**
 * Finds processes by an environment marker (`NAME=value` in /proc/<pid>/environ).
 *
 * A local provider stamps every command of a lease with a marker so that a worker started later (after
 * a crash or an upgrade) can still find that lease's processes, including `setsid`/`nohup` children
 * that left the original process group. Only processes the caller may read are seen.
 */
export function findMarkedProcesses(name: string, value: string): number[] {
  const needle = Buffer.from(`${name}=${value}\0`);
  const found: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let environ: Buffer;
    try {
      environ = readFileSync(`/proc/${entry}/environ`);
    } catch {
      continue; // gone, or not ours to read
    }
    if (environ.subarray(0, needle.length).equals(needle) || environ.includes(Buffer.concat([Buffer.from([0]), needle]))) {
      if (!isZombie(entry)) found.push(Number(entry));
    }
  }
  return found;
}

function isZombie(pid: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z";
  } catch {
    return true;
  }
}

/**
 * Ends every process carrying the marker, group by group (SIGTERM, SIGKILL after `graceMs`), and
 * repeats until none is left, since a dying parent may fork once more.
 */
export async function endMarkedProcesses(name: string, value: string, graceMs = 250): Promise<void> {
  for (let round = 0; round < 10; round++) {
    const pids = findMarkedProcesses(name, value);
    if (pids.length === 0) return;
    const groups = new Set(pids.map(processGroupOf).filter((pgid): pgid is number => pgid !== undefined));
    await Promise.all([...groups].map((pgid) => killProcessGroup(pgid, graceMs)));
    for (const pid of findMarkedProcesses(name, value)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

function readProcessGroup(pid: number | "self"): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const pgid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
    return Number.isInteger(pgid) ? pgid : undefined;
  } catch {
    return undefined;
  }
}

function processGroupOf(pid: number): number | undefined {
  const pgid = readProcessGroup(pid);
  // Never signal our own group (the worker's) even if a marker leaked into it.
  return pgid !== undefined && pgid > 1 && pgid !== readProcessGroup("self") ? pgid : undefined;
}
