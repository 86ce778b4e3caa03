import { execFile, spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { BoundedTail } from "./bounded-tail.js";

/**
 * The host's GNU tar, when there is one: packing and unpacking many small files is several times
 * faster there than in node-tar. Anything else on PATH (bsdtar, busybox) or no tar at all means
 * the node-tar code paths are used instead. Probed once per process.
 */
let probe: Promise<string | null> | undefined;

export function systemTar(): Promise<string | null> {
  probe ??= new Promise((resolve) => {
    execFile("tar", ["--version"], { env: tarEnv(), timeout: 10_000 }, (error, stdout) => {
      resolve(error === null && /^tar \(GNU tar\) \d/m.test(String(stdout)) ? "tar" : null);
    });
  });
  return probe;
}

/** Test seam: force the node-tar paths (`null`), a given binary, or re-probe (`undefined`). */
export function overrideSystemTar(value: string | null | undefined): void {
  probe = value === undefined ? undefined : Promise.resolve(value);
}

/**
 * A minimal environment: nothing from the worker's may change what tar does (TAR_OPTIONS,
 * POSIXLY_CORRECT, a locale that would convert names).
 */
function tarEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C" };
}

export interface TarProcess {
  child: ChildProcessByStdio<Writable, Readable, Readable>;
  stderr: BoundedTail;
  /** Resolves with the exit code (null when ended by a signal) once the process is gone. */
  exited: Promise<number | null>;
  kill(): void;
}

export function spawnTar(binary: string, args: string[], cwd?: string): TarProcess {
  const child = spawn(binary, args, { cwd, env: tarEnv(), stdio: ["pipe", "pipe", "pipe"] });
  const stderr = new BoundedTail(16 * 1024);
  child.stderr.on("data", stderr.push);
  child.stdin.on("error", () => {
    // EPIPE when tar exits early; its exit status tells the story.
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once("error", () => resolve(null));
    child.once("close", (code) => resolve(code));
  });
  return {
    child,
    stderr,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

/** Last line(s) of tar's stderr for an error message (paths only; tar prints no content). */
export function tarFailure(exitCode: number | null, stderr: BoundedTail): string {
  const tail = stderr.text().trim().split("\n").slice(-3).join("; ").slice(-600);
  return `tar ${exitCode === null ? "was killed" : `exited with code ${exitCode}`}${tail === "" ? "" : `: ${tail}`}`;
}
