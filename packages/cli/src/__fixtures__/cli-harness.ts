import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
export const CLI = path.join(REPO_ROOT, "packages", "cli", "dist", "main.js");

export function providerBuilt(driverKey: "fake-plugin" | "bubblewrap"): boolean {
  return existsSync(path.join(REPO_ROOT, "providers", driverKey, "dist", "worker.js")) && existsSync(path.join(REPO_ROOT, "providers", driverKey, "dist", "manifest.js"));
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A scratch home for one test file: XDG_STATE_HOME, a lease DB, workspaces. */
export function makeSandboxHome(prefix: string) {
  const root = mkdtempSync(path.join(os.tmpdir(), `pcs-cli-${prefix}-`));
  return {
    root,
    db: path.join(root, "leases.db"),
    env: { XDG_STATE_HOME: path.join(root, "state") } as Record<string, string>,
    dispose: () => rmSync(root, { recursive: true, force: true }),
  };
}

export function startCli(args: string[], options: { env?: Record<string, string>; cwd?: string } = {}): { child: ChildProcess; done: Promise<CliResult>; stdout: () => string; stderr: () => string } {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? os.tmpdir(), ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  started.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const done = new Promise<CliResult>((resolve) => child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, done, stdout: () => stdout, stderr: () => stderr };
}

export async function runCli(args: string[], options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  const { child, done } = startCli(args, options);
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  try {
    return await done;
  } finally {
    clearTimeout(timer);
  }
}

export async function waitFor(predicate: () => boolean, timeoutMs = 20_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Direct children of a pid (from /proc). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
}

/** Pids whose argv is exactly `argv` (e.g. ["sleep", "4321.5"]). */
export function pidsWithArgv(argv: string[]): number[] {
  const out: number[] = [];
  const wanted = argv.join("\0");
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").replace(/\0$/, "");
      if (cmdline === wanted && processAlive(Number(name))) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** A `sleep` the test can find again: a unique fractional duration. */
export function uniqueSleep(): string[] {
  return ["sleep", `${3000 + Math.floor(Math.random() * 5000)}.${Math.floor(Math.random() * 9) + 1}`];
}

const started = new Set<ChildProcess>();

/** Kills (by pid) every CLI a test started that is still running. */
export function killStartedClis(): void {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null && child.pid) {
      for (const pid of childPids(child.pid)) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      child.kill("SIGKILL");
    }
  }
  started.clear();
}

export function nonEmptyLines(text: string): string[] {
  return text.split("\n").filter((l) => l.trim() !== "");
}
