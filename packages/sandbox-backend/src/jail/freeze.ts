/**
 * Warm freeze and thaw of a running jail: every process stops where it is and keeps its memory.
 * With a freezer cgroup (v1 `freezer.state`, v2 `cgroup.freeze`) the kernel freezes the whole
 * cgroup atomically. Without one (the worker may not create cgroups), every process of the jail's
 * pid namespace is sent SIGSTOP from the host side (sandboxed code cannot send SIGCONT: nothing of
 * it runs any more), repeating the scan until no new process appears; processes that were already
 * stopped before the freeze are remembered and left stopped by the thaw.
 */
import fsp from "node:fs/promises";
import path from "node:path";
import { readProcStat } from "@paperclip-sandbox/kit";
import type { FreezerCgroup } from "./cgroups.js";
import { namespaceMembers, type JailIdentity } from "./process.js";

type FreezeMethod = "cgroup" | "signal";

export interface FrozenState {
  method: FreezeMethod;
  /** Signal method: processes that were stopped before the freeze (the thaw leaves them stopped). */
  preStopped: number[];
  at: string;
}

const POLL_MS = 1;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function controlFile(freezer: FreezerCgroup): string {
  return path.join(freezer.dir, freezer.version === 1 ? "freezer.state" : "cgroup.freeze");
}

/** What to write to thaw the cgroup (the keeper does it at the deadline so frozen tasks can die). */
export function thawWrite(freezer: FreezerCgroup): { file: string; value: string } {
  return { file: controlFile(freezer), value: freezer.version === 1 ? "THAWED" : "0" };
}

async function cgroupFrozen(freezer: FreezerCgroup): Promise<boolean> {
  if (freezer.version === 1) return (await fsp.readFile(controlFile(freezer), "utf8")).trim() === "FROZEN";
  return /^frozen 1$/m.test(await fsp.readFile(path.join(freezer.dir, "cgroup.events"), "utf8"));
}

async function cgroupThawed(freezer: FreezerCgroup): Promise<boolean> {
  if (freezer.version === 1) return (await fsp.readFile(controlFile(freezer), "utf8")).trim() === "THAWED";
  return /^frozen 0$/m.test(await fsp.readFile(path.join(freezer.dir, "cgroup.events"), "utf8"));
}

/** How often a freeze still under way is asked for again (see below). */
const REFREEZE_MS = 10;

export async function freezeCgroup(freezer: FreezerCgroup, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const request = () => fsp.writeFile(controlFile(freezer), freezer.version === 1 ? "FROZEN" : "1");
  await request();
  let lastRequest = Date.now();
  // v1 reports FREEZING until every task has stopped. A parent waiting in vfork for a child that
  // froze before its exec can keep it there for good; asking again freezes it (runc does the same).
  while (!(await cgroupFrozen(freezer))) {
    if (Date.now() > deadline) {
      await thawCgroup(freezer).catch(() => undefined);
      throw new Error(`the jail did not freeze within ${timeoutMs} ms`);
    }
    await sleep(POLL_MS);
    if (Date.now() - lastRequest >= REFREEZE_MS) {
      await request();
      lastRequest = Date.now();
    }
  }
}

export async function thawCgroup(freezer: FreezerCgroup, timeoutMs = 5_000): Promise<void> {
  const { file, value } = thawWrite(freezer);
  const deadline = Date.now() + timeoutMs;
  await fsp.writeFile(file, value);
  while (!(await cgroupThawed(freezer))) {
    if (Date.now() > deadline) throw new Error(`the jail did not thaw within ${timeoutMs} ms`);
    await sleep(POLL_MS);
  }
}

const isStopped = (state: string | undefined) => state === "T" || state === "t";

/** SIGSTOPs every process of the pid namespace until none is left running; returns the pre-stopped ones. */
export async function freezeBySignals(jail: JailIdentity, timeoutMs = 5_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  const signalled = new Set<number>();
  const preStopped = new Set<number>();
  for (;;) {
    const members = await namespaceMembers(jail);
    let settled = true;
    for (const pid of members) {
      const state = readProcStat(pid)?.state;
      if (!signalled.has(pid)) {
        // A process forked before its parent stopped shows up in a later scan: stop it too.
        signalled.add(pid);
        if (isStopped(state)) preStopped.add(pid);
        else {
          try {
            process.kill(pid, "SIGSTOP");
          } catch {
            // Exited meanwhile.
          }
          settled = false;
        }
      } else if (state !== undefined && state !== "Z" && !isStopped(state)) {
        settled = false;
      }
    }
    if (settled) return [...preStopped];
    if (Date.now() > deadline) {
      await thawBySignals(jail, [...preStopped]);
      throw new Error(`the jail did not stop within ${timeoutMs} ms`);
    }
    await sleep(POLL_MS);
  }
}

export async function thawBySignals(jail: JailIdentity, preStopped: readonly number[]): Promise<void> {
  const keep = new Set(preStopped);
  for (const pid of await namespaceMembers(jail)) {
    if (keep.has(pid)) continue;
    try {
      process.kill(pid, "SIGCONT");
    } catch {
      // Exited meanwhile.
    }
  }
}
