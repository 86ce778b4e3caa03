import { getSandbox, type Sandbox } from "@cloudflare/sandbox";
import type { Env } from "./env.js";
import { BridgeError } from "./http.js";
import { quote } from "./shell.js";

export type SessionStrategy = "named" | "default";

export const DEFAULT_CWD = "/workspace/paperclip";
export const DEFAULT_SESSION_ID = "paperclip";
export const DEFAULT_SLEEP_AFTER = "10m";
export const DEFAULT_TIMEOUT_MS = 300_000;
/** The session the bridge's own housekeeping runs in (never the lease's, which may be wedged). */
export const CONTROL_SESSION_ID = "paperclip-bridge-control";

/** What acquire, resume and probe share. */
export interface LeaseSettings {
  remoteCwd: string;
  keepAlive: boolean;
  sleepAfter: string;
  normalizeId: boolean;
  sessionStrategy: SessionStrategy;
  sessionId: string;
  timeoutMs: number;
}

function normalizeSandboxId(raw: string): string {
  return raw
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/^-+|-+$/g, "");
}

/** `pc-env-<environmentId>` for a reused lease, else `pc-<runId>-<8 random>`; normalised unless told not to. */
export function buildLeaseSandboxId(input: { environmentId: string; runId: string; reuseLease: boolean; normalizeId: boolean }): string {
  const raw = input.reuseLease ? `pc-env-${input.environmentId}` : `pc-${input.runId}-${crypto.randomUUID().slice(0, 8)}`;
  return input.normalizeId ? normalizeSandboxId(raw) : raw;
}

export function sandboxFor(env: Env, id: string, options: { keepAlive?: boolean; sleepAfter?: string } = {}): Sandbox {
  return getSandbox(env.Sandbox, id, { keepAlive: options.keepAlive ?? false, sleepAfter: options.sleepAfter ?? DEFAULT_SLEEP_AFTER });
}

/**
 * The lease sentinel. Upstream's template keeps it at the workspace root, where Paperclip's
 * workspace upload deletes it on every run (it empties the workspace but for `.paperclip-runtime`),
 * so a resume then finds the state "lost"; this bridge keeps it inside `.paperclip-runtime`, and a
 * resume also accepts one at the old place (a sandbox an older bridge made).
 */
const sentinelPath = (remoteCwd: string): string => `${remoteCwd.replace(/\/+$/, "") || ""}/.paperclip-runtime/.paperclip-lease.json`;
const templateSentinelPath = (remoteCwd: string): string => `${remoteCwd.replace(/\/+$/, "") || ""}/.paperclip-lease.json`;

/** Runs a housekeeping command in the control session; a non-zero exit is an error naming `action`. */
export async function controlExec(sandbox: Sandbox, command: string, action: string, timeoutMs = 60_000): Promise<string> {
  const session = await sandbox.getSession(CONTROL_SESSION_ID);
  let result;
  try {
    result = await session.exec(command, { cwd: "/", timeout: timeoutMs });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/timed out|timeout/i.test(message)) throw new Error(`${action} timed out: ${message}`);
    throw error;
  }
  if (result.exitCode !== 0) throw new Error(`${action} failed with exit code ${String(result.exitCode)}${result.stderr ? `: ${result.stderr.trim()}` : ""}`);
  return result.stdout;
}

export async function prepareWorkspace(sandbox: Sandbox, remoteCwd: string): Promise<void> {
  await controlExec(sandbox, `mkdir -p ${quote(remoteCwd)}`, "Create the workspace");
}

export async function writeSentinel(sandbox: Sandbox, providerLeaseId: string, settings: LeaseSettings, resumedLease: boolean): Promise<void> {
  const record = { provider: "cloudflare", providerLeaseId, ...settings, resumedLease, updatedAt: new Date().toISOString() };
  const path = sentinelPath(settings.remoteCwd);
  const text = JSON.stringify(record, null, 2);
  const dir = path.slice(0, path.lastIndexOf("/"));
  await controlExec(
    sandbox,
    `mkdir -p ${quote(settings.remoteCwd)} ${quote(dir)} && printf '%s\\n' ${quote(text)} > ${quote(`${path}.pending`)} && mv -f ${quote(`${path}.pending`)} ${quote(path)}`,
    "Write the lease sentinel",
  );
}

/** True when the sentinel is there and not empty (a container that lost its disk has none). */
export async function hasSentinel(sandbox: Sandbox, remoteCwd: string): Promise<boolean> {
  const session = await sandbox.getSession(CONTROL_SESSION_ID);
  try {
    const result = await session.exec(`test -s ${quote(sentinelPath(remoteCwd))} || test -s ${quote(templateSentinelPath(remoteCwd))}`, { cwd: "/", timeout: 60_000 });
    return result.exitCode === 0 || result.exitCode === null;
  } catch {
    return false;
  }
}

export async function destroyQuietly(sandbox: Sandbox): Promise<void> {
  try {
    await sandbox.destroy();
  } catch {
    // gone is what a destroy wants
  }
}
