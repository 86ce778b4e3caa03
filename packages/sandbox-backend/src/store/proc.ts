/** Process identity from /proc: a pid plus its start time names one process across pid reuse. */
import { readProcStat } from "@paperclip-sandbox/kit";

/** /proc/<pid>/stat field 22 (start time in clock ticks since boot); null when the pid is gone. */
export function processStartTime(pid: number): string | null {
  return readProcStat(pid)?.startTicks || null;
}

/** The process is running and, when `startTime` is given, is still the same process. */
export function processAlive(pid: number, startTime: string | null): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const current = processStartTime(pid);
  if (current === null) return false;
  return startTime === null || current === startTime;
}
