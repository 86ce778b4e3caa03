/** The sandbox record (sandbox.json): everything a later worker needs to adopt, restart or reap it. */
import fsp from "node:fs/promises";
import { randomBytes } from "node:crypto";
import type { FreezerCgroup } from "../jail/cgroups.js";
import type { FrozenState } from "../jail/freeze.js";
import type { JailRecord } from "../jail/process.js";
import type { EgressSpec, SandboxLimits, SandboxState } from "../types.js";
import type { SandboxLayout } from "./layout.js";

interface SandboxSpec {
  rootfs: string | null;
  env: Record<string, string>;
  limits: SandboxLimits;
  egress: EgressSpec;
  /** Absent in records written before users and mounts existed: the defaults. */
  user?: { name: string; uid: number; gid: number; home: string };
  mounts?: Array<{ path: string; readOnly: boolean; volume?: string; subPath?: string }>;
}

export interface SandboxRecord {
  /** 3: writable directories under disk/ (2: directly in the sandbox directory, still read). */
  version: 2 | 3;
  id: string;
  state: SandboxState;
  createdAt: string;
  /** ISO time at which the keeper ends the jail. */
  expiresAt: string;
  labels: Record<string, string>;
  metadata: Record<string, unknown>;
  spec: SandboxSpec;
  /** The worker that last started or adopted the sandbox. */
  owner: { pid: number; startTime: string | null; uid: number };
  jail: JailRecord | null;
  /** cgroup directories of the running jail (removed when it stops). */
  cgroups: string[];
  freezer: FreezerCgroup | null;
  frozen: FrozenState | null;
}

export async function writeRecord(layout: SandboxLayout, record: SandboxRecord): Promise<void> {
  // A unique temporary name: two writes in flight never share (and clobber) one file.
  const temp = `${layout.record}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  await fsp.writeFile(temp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  await fsp.rename(temp, layout.record);
}

/** The record, or null when there is none (or it is not a version-2 or -3 record of this id). */
export async function readRecord(layout: SandboxLayout, id: string): Promise<SandboxRecord | null> {
  let text: string;
  try {
    text = await fsp.readFile(layout.record, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "ENOTDIR") return null;
    throw error;
  }
  try {
    const record = JSON.parse(text) as SandboxRecord;
    return (record.version === 2 || record.version === 3) && record.id === id ? record : null;
  } catch {
    return null;
  }
}
