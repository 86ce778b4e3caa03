/**
 * Extra HTTP headers for Coder's control plane, as the coder CLI takes them from its environment:
 * `CODER_HEADER` (comma-separated `key=value` pairs) and `CODER_HEADER_COMMAND` (a command whose
 * output lines are `key=value`; run with `sh -c`, refused on Windows). They go on `/api/v2`
 * requests only, never to the app proxy or the runner.
 */
import { execFile } from "node:child_process";

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const COMMAND_TIMEOUT_MS = 10_000;

class HeaderConfigError extends Error {
  override name = "HeaderConfigError";
}

function parsePairs(pairs: string[], source: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const raw of pairs) {
    const pair = raw.trim();
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    const name = eq < 0 ? "" : pair.slice(0, eq).trim();
    if (!HEADER_NAME.test(name)) throw new HeaderConfigError(`${source}: each header must be key=value with a valid header name (got an entry of ${pair.length} characters without one)`);
    const value = pair.slice(eq + 1).trim();
    if (/[\r\n\0]/.test(value)) throw new HeaderConfigError(`${source}: the value of ${name} must be one line`);
    headers[name] = value;
  }
  return headers;
}

/** `CODER_HEADER`: `a=1,b=2` (one entry per comma, as the CLI reads a string array from its environment). */
function headersFromEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const value = env.CODER_HEADER;
  return value ? parsePairs(value.split(","), "CODER_HEADER") : {};
}

/** `CODER_HEADER_COMMAND`'s output headers (the command's text never appears in an error: it may hold secrets). */
async function headersFromCommand(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<Record<string, string>> {
  const command = env.CODER_HEADER_COMMAND;
  if (!command) return {};
  if (platform === "win32") throw new HeaderConfigError("CODER_HEADER_COMMAND is not supported on Windows (unset it, or use CODER_HEADER)");
  const output = await new Promise<string>((resolve, reject) => {
    execFile("/bin/sh", ["-c", command], { env, timeout: COMMAND_TIMEOUT_MS, maxBuffer: 64 * 1024 }, (error, stdout) => {
      if (error) reject(new HeaderConfigError(`CODER_HEADER_COMMAND failed (${error.killed ? "timed out" : `exit ${String((error as { code?: unknown }).code ?? "?")}`})`));
      else resolve(stdout);
    });
  });
  return parsePairs(output.split("\n"), "CODER_HEADER_COMMAND output");
}

/** Both sources, the command's lines winning over `CODER_HEADER` for the same name. */
export async function controlPlaneHeaders(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<Record<string, string>> {
  return { ...headersFromEnv(env), ...(await headersFromCommand(env, platform)) };
}
