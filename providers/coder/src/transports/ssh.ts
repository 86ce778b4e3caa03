/**
 * The `ssh` transport: `coder ssh <owner>/<workspace>.<agent> -- <command>` through the operator's
 * Coder CLI (`coderBin`), which reaches the agent over Coder's tailnet. The CLI gets the URL and
 * token in its environment (never in argv), and a config directory of its own so nothing of the
 * worker user's CLI login is read or written. Streams both ways; the exit travels as a marker line
 * (the CLI may stay open while a background child holds the channel); an abort ends the remote
 * group from a second call.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { exitMarkerLine, runSpawnedScript, shellQuote, STREAM_TRANSPORT, withInlineEnv, withRemoteGroupKill, type ScriptRunner, type TransportCapabilities } from "@paperclip-sandbox/kit";

export interface SshTarget {
  coderBin: string;
  coderUrl: string;
  token: string;
  owner: string;
  workspace: string;
  agent: string;
  /** The worker's environment (PATH to find the CLI; CODER_HEADER* pass through). */
  env: NodeJS.ProcessEnv;
}

/** The full contract but signals: an abort ends the local CLI only (withRemoteGroupKill adds the group kill). */
const SSH_CAPABILITIES: TransportCapabilities = Object.freeze({ ...STREAM_TRANSPORT, signals: "none" });

let configDir: string | undefined;
const CLI_DIR_PREFIX = "paperclip-coder-cli-";
/** One empty CLI config directory per worker: the CLI must not use (or overwrite) a login of the worker's user. */
function cliConfigDir(): string {
  if (!configDir) {
    removeDeadWorkersDirs();
    configDir = mkdtempSync(path.join(tmpdir(), `${CLI_DIR_PREFIX}${process.pid}-`));
    // A worker whose stdin closes exits without the shutdown call: gone then too (sync: `exit` runs no more I/O).
    process.once("exit", removeCliConfigDir);
  }
  return configDir;
}

/**
 * Removes the worker's CLI config directory (the plugin's shutdown hook calls this; the host sends
 * that before it ends a worker, and signals only one that did not answer). A later command makes a new one.
 */
export function removeCliConfigDir(): void {
  const dir = configDir;
  if (!dir) return;
  configDir = undefined;
  process.removeListener("exit", removeCliConfigDir);
  rmSync(dir, { recursive: true, force: true });
}

/**
 * A worker that was killed (SIGKILL, a crash) ran neither its shutdown hook nor its exit handler:
 * its directory (named after its pid) is removed by the next worker that makes one. Only our own
 * directories whose worker is gone.
 */
function removeDeadWorkersDirs(): void {
  const parent = tmpdir();
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(new RegExp(`^${CLI_DIR_PREFIX}(\\d+)-`).exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || processExists(pid)) continue;
    const dir = path.join(parent, name);
    try {
      if (statSync(dir).uid === process.getuid?.()) rmSync(dir, { recursive: true, force: true });
    } catch {
      // Gone meanwhile, or not ours to remove.
    }
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/** The environment of the CLI process: only what it needs. */
export function cliEnv(target: Pick<SshTarget, "coderUrl" | "token" | "env">): Record<string, string> {
  const env: Record<string, string> = {
    PATH: target.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: target.env.HOME ?? tmpdir(),
    CODER_URL: target.coderUrl,
    CODER_SESSION_TOKEN: target.token,
    CODER_CONFIG_DIR: cliConfigDir(),
  };
  for (const name of ["CODER_HEADER", "CODER_HEADER_COMMAND", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"]) {
    const value = target.env[name];
    if (value) env[name] = value;
  }
  return env;
}

function sshRunnerInner(target: SshTarget): ScriptRunner {
  return {
    capabilities: SSH_CAPABILITIES,
    run(script, io) {
      const marker = `PCEXIT${randomBytes(12).toString("hex")}`;
      // The agent runs this with the user's shell; the script itself runs under sh as the kit expects.
      const remote = `/bin/sh -c ${shellQuote(script)} sh; ${exitMarkerLine(marker)}`;
      return runSpawnedScript(
        {
          file: target.coderBin,
          args: ["ssh", `${target.owner}/${target.workspace}.${target.agent}`, "--", remote],
          env: cliEnv(target),
          exitMarker: marker,
        },
        { ...io, env: undefined },
      );
    },
  };
}

/** Streams through the CLI; env goes inline (the CLI has no env field for the remote command); group kill by a second call. */
export function sshRunner(target: SshTarget, baseEnv: Record<string, string>): ScriptRunner {
  const runner = withRemoteGroupKill(withInlineEnv(sshRunnerInner(target)));
  return {
    capabilities: runner.capabilities,
    run: (script, io) => runner.run(script, { ...io, env: { ...baseEnv, ...(io.env ?? {}) } }),
  };
}
