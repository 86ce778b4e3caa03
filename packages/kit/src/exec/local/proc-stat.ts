import { readFileSync } from "node:fs";

/** The fields of `/proc/<pid>/stat` this project needs. */
export interface ProcStat {
  /** One letter: R, S, D, Z, T, ... */
  state: string;
  ppid: number;
  pgrp: number;
  /** Start time in clock ticks since boot: with the pid, identifies one process across pid reuse. */
  startTicks: string;
}

/** Reads `/proc/<pid>/stat`; undefined when the process is gone (or procfs is missing). */
export function readProcStat(pid: number | "self"): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses: fields resume after the last ')'.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0] ?? "", ppid: Number(fields[1]), pgrp: Number(fields[2]), startTicks: fields[19] ?? "" };
}

/** True for a process that has exited but not been reaped (or is gone altogether). */
export function isZombieOrGone(pid: number): boolean {
  const stat = readProcStat(pid);
  return stat === undefined || stat.state === "Z";
}
