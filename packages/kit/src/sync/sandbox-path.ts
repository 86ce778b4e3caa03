import path from "node:path";
import { SyncError } from "./errors.js";

const posix = path.posix;

/**
 * A sandbox path after the host-side (lexical) check, split the way the sandbox-side check needs it:
 * the script `cd -P`s into `root`, then one component at a time (re-checking `pwd -P` against the
 * roots after each step), and finally operates on `name` relative to the directory it is in.
 */
export interface ConfinedSandboxPath {
  /** The normalized absolute path as given. */
  path: string;
  /** The root that lexically contains `path` (the longest one). */
  root: string;
  /** Components from `root` down to the parent directory of `name` (possibly empty). */
  parentComponents: string[];
  /** Last component; empty when `path` is the root itself. */
  name: string;
}

/** Validate the configured roots once: absolute, normalized POSIX directories, at least one. */
export function normalizeRoots(roots: readonly string[]): string[] {
  if (!Array.isArray(roots) || roots.length === 0) {
    throw new SyncError("SYNC_OPTIONS_INVALID", "at least one sandbox root is required");
  }
  return roots.map((root) => {
    assertWellFormed(root, "sandbox root");
    return root;
  });
}

/**
 * Host-side check of a sandbox path: absolute, already normalized (no `.`/`..`/`//`/trailing `/`),
 * and lexically inside one of `roots`. It does not touch the sandbox; the scripts re-check after
 * resolving symlinks there, so a planted symlink cannot widen the path.
 */
export function confineSandboxPath(candidate: string, roots: readonly string[], what: string): ConfinedSandboxPath {
  assertWellFormed(candidate, what);
  const root = longestContainingRoot(candidate, roots);
  if (root === undefined) {
    throw new SyncError("SYNC_PATH_OUTSIDE_ROOT", `${what} ${candidate} is outside the sync roots`);
  }
  const relative = candidate === root ? "" : candidate.slice(root === "/" ? 1 : root.length + 1);
  const components = relative === "" ? [] : relative.split("/");
  const name = components.pop() ?? "";
  return { path: candidate, root, parentComponents: components, name };
}

function longestContainingRoot(candidate: string, roots: readonly string[]): string | undefined {
  let best: string | undefined;
  for (const root of roots) {
    const inside = root === "/" || candidate === root || candidate.startsWith(`${root}/`);
    if (inside && (best === undefined || root.length > best.length)) best = root;
  }
  return best;
}

function assertWellFormed(candidate: string, what: string): void {
  if (typeof candidate !== "string" || candidate === "") {
    throw new SyncError("SYNC_PATH_INVALID", `${what} must be a non-empty string`);
  }
  // Newlines and NUL cannot be carried faithfully through `$(pwd -P)` comparisons; refuse them.
  if (/[\n\r\0]/.test(candidate)) {
    throw new SyncError("SYNC_PATH_INVALID", `${what} contains a control character`);
  }
  if (!candidate.startsWith("/")) {
    throw new SyncError("SYNC_PATH_INVALID", `${what} ${candidate} is not an absolute POSIX path`);
  }
  const normalized = posix.normalize(candidate);
  const trimmed = normalized.length > 1 && normalized.endsWith("/") ? normalized.slice(0, -1) : normalized;
  if (trimmed !== candidate) {
    throw new SyncError("SYNC_PATH_INVALID", `${what} ${candidate} is not normalized`);
  }
}
