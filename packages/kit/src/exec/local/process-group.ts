import { readdirSync } from "node:fs";
import { readProcStat } from "./proc-stat.js";
import { setTimeout as sleep } from "node:timers/promises";

const POLL_MS = 10;
/** After SIGKILL a group should vanish at once; this bounds the wait for an unkillable (D-state) member. */
const AFTER_KILL_LIMIT_MS = 5_000;

/**
 * True while the process group has a member that is not a zombie. Zombies count as gone: they run
 * nothing, and in containers whose PID 1 does not reap orphans they would otherwise linger forever.
 */
export function processGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  return hasLiveMember(pgid);
}

function hasLiveMember(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true; // no procfs: trust kill(0)
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProcStat(Number(entry));
    if (stat && stat.pgrp === pgid && stat.state !== "Z") return true;
  }
  return false;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone (ESRCH): nothing to signal.
  }
}

/**
 * Ends a whole process group: SIGTERM, then SIGKILL after `graceMs`, resolving once no live member
 * remains (or, for a member stuck in the kernel, shortly after SIGKILL).
 */
export async function killProcessGroup(pgid: number, graceMs = 250): Promise<void> {
  if (!processGroupAlive(pgid)) return;
  signalGroup(pgid, "SIGTERM");
  const killAt = Date.now() + graceMs;
  while (Date.now() < killAt) {
    await sleep(POLL_MS);
    if (!processGroupAlive(pgid)) return;
  }
  signalGroup(pgid, "SIGKILL");
  const giveUpAt = Date.now() + AFTER_KILL_LIMIT_MS;
  while (processGroupAlive(pgid) && Date.now() < giveUpAt) await sleep(POLL_MS);
}

/**
 * The process groups one owner (e.g. a lease) has started. Groups outlive their script when it leaves
 * background children behind, so the owner ends them all when its lifetime ends.
 */
export class ProcessGroupSet {
  private readonly groups = new Set<number>();

  add(pgid: number): void {
    this.groups.add(pgid);
  }

  /** Groups with a live member right now. */
  alive(): number[] {
    return [...this.groups].filter(processGroupAlive);
  }

  /** Ends every group (SIGTERM, SIGKILL after `graceMs`) and resolves once none is alive. */
  async endAll(graceMs?: number): Promise<void> {
    const groups = [...this.groups];
    this.groups.clear();
    await Promise.all(groups.map((pgid) => killProcessGroup(pgid, graceMs)));
  }
}
