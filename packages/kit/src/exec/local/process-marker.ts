import { readdirSync, readFileSync } from "node:fs";
import { killProcessGroup } from "./process-group.js";
import { readProcStat } from "./proc-stat.js";

/**
 * Finds processes by an environment marker (`NAME=value` in /proc/<pid>/environ).
 *
 * A local provider stamps every command of a lease with a marker so that a worker started later (after
 * a crash or an upgrade) can still find that lease's processes, including `setsid`/`nohup` children
 * that left the original process group. Only processes the caller may read are seen.
 */
export function findMarkedProcesses(name: string, value: string): number[] {
  const needle = Buffer.from(`${name}=${value}\0`);
  const inner = Buffer.from(`\0${name}=${value}\0`);
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
    if (environ.subarray(0, needle.length).equals(needle) || environ.includes(inner)) {
      const state = readProcStat(Number(entry))?.state;
      if (state !== undefined && state !== "Z") found.push(Number(entry));
    }
  }
  return found;
}

/**
 * Ends every process carrying the marker, group by group (SIGTERM, SIGKILL after `graceMs`), and
 * repeats until none is left, since a dying parent may fork once more.
 */
export async function endMarkedProcesses(name: string, value: string, graceMs = 250): Promise<void> {
  for (let round = 0; round < 10; round++) {
    const pids = findMarkedProcesses(name, value);
    if (pids.length === 0) return;
    await Promise.all(processGroupsOf(pids).map((pgid) => killProcessGroup(pgid, graceMs)));
    for (const pid of findMarkedProcesses(name, value)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

/** Process groups of `pids`, never our own (the worker's) even if a marker leaked into it. */
function processGroupsOf(pids: number[]): number[] {
  const own = readProcStat("self")?.pgrp;
  const groups = new Set<number>();
  for (const pid of pids) {
    const pgid = readProcStat(pid)?.pgrp;
    if (pgid !== undefined && Number.isInteger(pgid) && pgid > 1 && pgid !== own) groups.add(pgid);
  }
  return [...groups];
}
