import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import os from "node:os";
import { readProcStat } from "@paperclip-sandbox/kit";

function readTrimmed(file: string): string | undefined {
  try {
    const text = readFileSync(file, "utf8").trim();
    return text || undefined;
  } catch {
    return undefined;
  }
}

/** A stable, non-reversible id for this machine (hash of /etc/machine-id, else the hostname). */
export function hostId(): string {
  const source = readTrimmed("/etc/machine-id") ?? readTrimmed("/var/lib/dbus/machine-id") ?? os.hostname();
  return createHash("sha256").update(`paperclip-sandbox:${source}`).digest("hex").slice(0, 16);
}

/** The kernel's boot id: a pid recorded under another boot id is certainly gone. */
export function bootId(): string | undefined {
  return readTrimmed("/proc/sys/kernel/random/boot_id");
}

/** Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat), to tell pid reuse apart. */
function processStartTicks(pid: number): string | undefined {
  return readProcStat(pid)?.startTicks || undefined;
}

export interface ProcessOwner {
  hostId: string;
  bootId: string | undefined;
  pid: number;
  startTicks: string | undefined;
}

export function currentOwner(): ProcessOwner {
  return { hostId: hostId(), bootId: bootId(), pid: process.pid, startTicks: processStartTicks(process.pid) };
}

export type OwnerStatus = "alive" | "gone" | "unknown";

/** Whether the process that recorded a lease still runs. `unknown` for another machine's owner. */
export function ownerStatus(owner: ProcessOwner, here: { hostId: string; bootId: string | undefined } = { hostId: hostId(), bootId: bootId() }): OwnerStatus {
  if (owner.hostId !== here.hostId) return "unknown";
  if (owner.bootId && here.bootId && owner.bootId !== here.bootId) return "gone";
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return "gone";
    // EPERM: a process with that pid exists but belongs to someone else; fall through to the ticks check.
  }
  const stat = readProcStat(owner.pid);
  if (stat === undefined || !stat.startTicks) return "gone";
  if (owner.startTicks && stat.startTicks !== owner.startTicks) return "gone";
  // A zombie (state Z) is gone for our purposes.
  return stat.state === "Z" ? "gone" : "alive";
}
