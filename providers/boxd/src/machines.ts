import { randomBytes } from "node:crypto";
import { LeaseGoneError, pollUntil, type SandboxHandle } from "@paperclip-sandbox/kit";
import type { BoxdApi, BoxdMachine } from "./api.js";
import type { BoxdTarget } from "./transport.js";

/** The workspace, under the machine user's home (boxd's user is `boxd`, home /home/boxd). */
export const WORKSPACE_DIR = "paperclip-workspace";
/** How long a deletion may take before the release reports it unconfirmed. */
const DELETE_CONFIRM_MS = 120_000;
/** How long a machine may stay in a transitional state (booting, starting, migrating) before we give up. */
const SETTLE_MS = 180_000;

/** Statuses after which a machine no longer exists for us. */
const GONE = new Set(["destroying", "destroyed", "deleted"]);
const FROZEN = new Set(["suspended", "standby", "hibernated"]);
const STABLE = new Set(["running", "stopped", "failed", ...FROZEN, ...GONE]);

export interface BoxdHandle extends SandboxHandle {
  api: BoxdApi;
  /** The boxd account (user id) of the key that made or found it. */
  account: string;
  machine: BoxdMachine;
  target: BoxdTarget;
}

/** The kit's state for a boxd status: suspended and hibernated are frozen, stopped (and failed) stopped. */
export function stateOf(status: string): SandboxHandle["state"] {
  if (FROZEN.has(status)) return "frozen";
  if (status === "stopped") return "stopped";
  // Failed or being destroyed: still listed, never running again.
  if (status === "failed" || GONE.has(status)) return "ended";
  return "running";
}

export const isGoneStatus = (status: string) => GONE.has(status);

/** `<prefix>-<8 of the run id>-<6 random>`: a DNS label of at most 55 characters, unique per lease. */
export function machineName(prefix: string, runId: string | undefined): string {
  const run =
    (runId ?? "")
      .toLowerCase()
      .replace(/[^a-z0-9]/g, "")
      .slice(0, 8) || "run";
  return `${prefix}-${run}-${randomBytes(3).toString("hex")}`;
}

/** Polls boxd (a growing pause, 25 ms doubling to 500 ms) until `done` holds or the deadline passes. */
function poll(what: string, timeoutMs: number, read: () => Promise<BoxdMachine | null>, done: (machine: BoxdMachine | null) => boolean, signal?: AbortSignal): Promise<BoxdMachine | null> {
  return pollUntil(read, done, { what: `boxd ${what}`, timeoutMs, intervalMs: 25, maxIntervalMs: 500, signal, describe: (machine) => (machine ? `it is ${machine.status}` : "it is gone") });
}

/** The machine once it is in a stable state (running, stopped, suspended, ...); null when it is gone. */
export async function settled(api: BoxdApi, id: string, signal?: AbortSignal): Promise<BoxdMachine | null> {
  const machine = await poll(
    `machine ${id} to leave its transitional state`,
    SETTLE_MS,
    () => api.getMachine(id, signal),
    (seen) => !seen || STABLE.has(seen.status),
    signal,
  );
  return !machine || GONE.has(machine.status) ? null : machine;
}

/** Resolves once boxd no longer has the machine (GetVm NOT_FOUND, or `destroyed`). */
export async function confirmGone(api: BoxdApi, id: string, signal?: AbortSignal): Promise<void> {
  await poll(
    `machine ${id} to be gone after its deletion was asked`,
    DELETE_CONFIRM_MS,
    () => api.getMachine(id, signal),
    (seen) => !seen || seen.status === "destroyed" || seen.status === "deleted",
    signal,
  );
}

/** Wakes a suspended or hibernated machine, starts a stopped one, and waits until it runs. */
export async function makeRunning(api: BoxdApi, machine: BoxdMachine, signal?: AbortSignal): Promise<BoxdMachine> {
  if (machine.status === "running") return machine;
  if (FROZEN.has(machine.status)) {
    // ResumeVm answers once the machine runs again (it reports how long that took).
    await api.resumeMachine(machine.id, signal);
    return { ...machine, status: "running" };
  }
  if (machine.status === "stopped") await api.startMachine(machine.id, signal);
  else if (machine.status === "failed") throw new LeaseGoneError(`boxd machine ${machine.id} has failed`);
  const seen = await poll(
    `machine ${machine.id} to come back to running`,
    SETTLE_MS,
    () => api.getMachine(machine.id, signal),
    (now) => !now || GONE.has(now.status) || now.status === "running",
    signal,
  );
  if (!seen || GONE.has(seen.status)) throw new LeaseGoneError(`boxd machine ${machine.id} is gone`);
  return seen;
}
