import { shellQuote } from "../exec/quote.js";
import type { ScriptRunner } from "../transport.js";
import type { SandboxHandle, WorkspaceDeclaration } from "./types.js";

const resolveValue = <C>(value: string | ((config: C) => string), config: C): string => (typeof value === "function" ? value(config) : value);

/** An absolute path without `..` components: what a lease's `remoteCwd` must look like. */
function plausibleWorkspace(value: unknown): value is string {
  return typeof value === "string" && value.startsWith("/") && !value.split("/").includes("..");
}

/**
 * The workspace when it can be known without a call: the directory `create` made, else the one the
 * lease reported at acquire (`metadata.remoteCwd`), else a declared absolute path.
 */
export function knownWorkspace<H extends SandboxHandle, C>(decl: WorkspaceDeclaration<H, C>, handle: H, config: C, metadata: Record<string, unknown>): string | undefined {
  if ("existing" in decl) return decl.existing(handle, config);
  if (plausibleWorkspace(metadata.remoteCwd)) return metadata.remoteCwd;
  return "path" in decl ? resolveValue(decl.path, config) : undefined;
}

/**
 * Makes the workspace through the sandbox's own runner (one call) and returns its absolute path:
 * the declared path, or the real path of the directory under `$HOME`. A workspace `create` made
 * costs nothing.
 */
export async function makeWorkspace<H extends SandboxHandle, C>(decl: WorkspaceDeclaration<H, C>, handle: H, config: C, runner: () => ScriptRunner, signal?: AbortSignal): Promise<string> {
  if ("existing" in decl) return decl.existing(handle, config);
  const dir = "path" in decl ? shellQuote(resolveValue(decl.path, config)) : `"$HOME"/${shellQuote(resolveValue(decl.homeSubdir, config))}`;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const exit = await runner().run(`mkdir -p -- ${dir} && cd -- ${dir} && pwd -P`, {
    stdout: (chunk) => out.push(chunk),
    stderr: (chunk) => err.push(chunk),
    ...(signal ? { signal } : {}),
  });
  const printed = Buffer.concat(out).toString("utf8").trim().split("\n").at(-1) ?? "";
  if (exit.exitCode !== 0 || !printed.startsWith("/")) {
    const how = exit.reason === "exit" ? `exit ${exit.exitCode}` : exit.reason;
    throw new Error(`creating the workspace in sandbox ${handle.providerLeaseId} failed (${how}): ${Buffer.concat(err).toString("utf8").trim().slice(0, 300)}`);
  }
  return "path" in decl ? resolveValue(decl.path, config) : printed;
}
