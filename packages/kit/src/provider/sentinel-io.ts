import { shellQuote } from "../exec/quote.js";
import { buildSentinel, REUSE_SENTINEL_PATH, sentinelNamesFingerprint } from "../lease/sentinel.js";
import type { ScriptRunner } from "../transport.js";

/** Largest sentinel read back (it is a few dozen bytes; anything bigger is not ours). */
const MAX_SENTINEL_BYTES = 4096;

/**
 * The reuse sentinel lives in the sandbox's workspace and is written and read through the lease's
 * own runner, so the read happens inside the sandbox: a link planted there can only point at
 * something the sandbox could read anyway, never at a file of the worker's host.
 */
export async function writeSentinelVia(runner: ScriptRunner, workspaceDir: string, fingerprint: string, providerLeaseId: string): Promise<void> {
  const file = `${workspaceDir.replace(/\/+$/, "")}/${REUSE_SENTINEL_PATH}`;
  const dir = file.slice(0, file.lastIndexOf("/"));
  const script = `umask 077 && mkdir -p -- ${shellQuote(dir)} && rm -f -- ${shellQuote(file)} && cat > ${shellQuote(file)}`;
  const stderr: Buffer[] = [];
  const exit = await runner.run(script, { stdin: buildSentinel({ fingerprint, providerLeaseId }), stderr: (chunk) => stderr.push(chunk) });
  if (exit.exitCode !== 0) {
    throw new Error(`writing the reuse sentinel failed (exit ${exit.exitCode ?? exit.signal}): ${Buffer.concat(stderr).toString("utf8").trim().slice(0, 300)}`);
  }
}

export async function sentinelHolds(runner: ScriptRunner, workspaceDir: string, fingerprint: string): Promise<boolean> {
  const file = shellQuote(`${workspaceDir.replace(/\/+$/, "")}/${REUSE_SENTINEL_PATH}`);
  const out: Buffer[] = [];
  let held = 0;
  const exit = await runner.run(`[ -f ${file} ] && [ ! -L ${file} ] && head -c ${MAX_SENTINEL_BYTES} ${file}`, {
    stdout: (chunk) => {
      held += chunk.length;
      if (held <= MAX_SENTINEL_BYTES) out.push(chunk);
    },
  });
  return exit.exitCode === 0 && sentinelNamesFingerprint(Buffer.concat(out).toString("utf8"), fingerprint);
}
