/** The host pid of a sandbox's supervisor, found from its directory (for tests that act on it from the host). */
import fs from "node:fs";
import path from "node:path";
import { readProcStat } from "@paperclip-sandbox/kit";

/** The supervisor is the only child of the jail's init (the `jail.initPid` of the sandbox's record); null when there is none. */
export function supervisorPidOf(sandboxDir: string): number | null {
  const record = JSON.parse(fs.readFileSync(path.join(sandboxDir, "sandbox.json"), "utf8")) as { jail: { initPid: number } | null };
  if (!record.jail) return null;
  for (const name of fs.readdirSync("/proc")) {
    if (/^\d+$/.test(name) && readProcStat(Number(name))?.ppid === record.jail.initPid) return Number(name);
  }
  return null;
}

/** True when `pid` is stopped (SIGSTOP). */
export function isStopped(pid: number): boolean {
  const state = readProcStat(pid)?.state;
  return state === "T" || state === "t";
}
