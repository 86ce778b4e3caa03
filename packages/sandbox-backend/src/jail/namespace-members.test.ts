// A jail's processes are found by its pid namespace's inode number only while its init runs: the
// kernel gives a freed namespace's number to the next namespace made, so a jail that has ended may
// share its number with another jail (any worker's) that is running.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processAlive, processStartTime } from "../store/proc.js";
import { namespaceMembers, stopJail, type JailRecord } from "./process.js";

let unshare: ChildProcess | undefined;
let other: { pid: number; namespace: number } | undefined;

/** The pid-1 process of another pid namespace, as another jail's init would be (needs root or user namespaces). */
async function startOtherNamespace(): Promise<{ pid: number; namespace: number } | undefined> {
  const args = process.getuid?.() === 0 ? ["--pid", "--fork", "sleep", "60"] : ["--user", "--map-root-user", "--pid", "--fork", "sleep", "60"];
  unshare = spawn("unshare", args, { stdio: "ignore" });
  unshare.on("error", () => undefined);
  for (let i = 0; i < 200; i++) {
    const children = readChildren(unshare.pid);
    if (children.length > 0) {
      const pid = children[0]!;
      const link = readLink(`/proc/${pid}/ns/pid`);
      const namespace = Number(/^pid:\[(\d+)\]$/.exec(link ?? "")?.[1]);
      if (Number.isInteger(namespace) && namespace > 0 && readLink(`/proc/${unshare.pid}/ns/pid`) !== link) return { pid, namespace };
    }
    if (unshare.exitCode !== null) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return undefined;
}

function readChildren(pid: number | undefined): number[] {
  if (!pid) return [];
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function readLink(path: string): string | null {
  try {
    return fs.readlinkSync(path);
  } catch {
    return null;
  }
}

beforeAll(async () => {
  other = await startOtherNamespace();
});
afterAll(() => {
  unshare?.kill("SIGKILL");
  if (other) process.kill(other.pid, "SIGKILL");
});

describe("a jail's processes, by its pid namespace", () => {
  it("are the namespace's processes while the jail's init runs", (context) => {
    if (!other) return context.skip("unshare cannot make a pid namespace here");
    const running: JailRecord = jail(other, processStartTime(other.pid)!);
    return expect(namespaceMembers(running)).resolves.toEqual([other.pid]);
  });

  it("are none once the init has ended, even when its namespace number now names another jail", async (context) => {
    if (!other) return context.skip("unshare cannot make a pid namespace here");
    // The record of a jail that ended: its init's pid (here reused by the other jail's init) with the start time it had.
    const ended = jail(other, "1");
    expect(await namespaceMembers(ended)).toEqual([]);
    // Stopping the ended jail again (a destroy after it ended) leaves the other jail alone.
    await stopJail(ended, []);
    expect(processAlive(other.pid, processStartTime(other.pid))).toBe(true);
    expect(fs.readFileSync(`/proc/${other.pid}/stat`, "latin1")).not.toMatch(/\) [ZX] /);
  });
});

function jail(other: { pid: number; namespace: number }, initStartTime: string): JailRecord {
  return { keeperPid: 0, keeperStartTime: null, initPid: other.pid, initStartTime, pidNamespace: other.namespace, startedAt: new Date().toISOString() };
}
