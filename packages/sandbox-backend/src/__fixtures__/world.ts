/**
 * A state directory of its own per test file, with backends on it ("workers") and a clean-up that
 * destroys whatever a test left and removes the directory.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createSandboxBackend } from "../backend.js";
import type { BackendOptions, CreateSandboxOptions, Sandbox, SandboxBackend } from "../types.js";

export interface World {
  stateDir: string;
  /** The first backend ("worker"). */
  backend: SandboxBackend;
  /** Another backend on the same state dir, as a restarted worker would have. */
  newBackend(options?: Partial<BackendOptions>): SandboxBackend;
  create(options?: Partial<CreateSandboxOptions>): Promise<Sandbox>;
  close(): Promise<void>;
}

/**
 * The compiled supervisor (tests run the backend from source, but the jail runs built files): build
 * first with `npx tsc -b packages/sandbox-backend` (or `npm run build`).
 */
export const BUILT_SUPERVISOR = fileURLToPath(new URL("../../dist/supervisor/supervisor.mjs", import.meta.url));

export function startWorld(options: Partial<BackendOptions> = {}): World {
  if (!fs.existsSync(BUILT_SUPERVISOR)) throw new Error(`${BUILT_SUPERVISOR} is missing: build the package first (npx tsc -b packages/sandbox-backend)`);
  options = { supervisorScript: BUILT_SUPERVISOR, ...options };
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-test-"));
  const backends: SandboxBackend[] = [];
  const newBackend = (extra: Partial<BackendOptions> = {}) => {
    const backend = createSandboxBackend({ stateDir, ...options, ...extra });
    backends.push(backend);
    return backend;
  };
  const backend = newBackend();
  return {
    stateDir,
    backend,
    newBackend,
    create: (extra = {}) => backend.create({ ttlMs: 120_000, ...extra }),
    async close() {
      const cleaner = createSandboxBackend({ stateDir, ...options });
      for (const sandbox of await cleaner.list()) await cleaner.destroy(sandbox.id).catch(() => undefined);
      await Promise.all(backends.map((each) => each.close()));
      fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

/** Polls until `check` holds or the deadline passes; returns the last value. The default total is long: a wait ends once the check holds, so only a failing test pays it (a short one fails under load). */
export async function eventually<T>(read: () => Promise<T> | T, check: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!check(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    value = await read();
  }
  return value;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Host pids whose cmdline contains `needle` (zombies excluded): how a test sees jail processes from outside. */
export function hostProcessesMatching(needle: string): number[] {
  const pids: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      if (fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").includes(needle)) pids.push(Number(name));
    } catch {
      // gone, or not ours
    }
  }
  return pids;
}
