/**
 * What a caller may ask the runner, checked: the seed's `POST /run` body and the stream route's
 * start message share these rules. Each problem names the field and the rule.
 */

export interface RunRequest {
  script: string;
  env: Record<string, string>;
  cwd: string | undefined;
  timeoutMs: number | undefined;
}

export class RequestError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A day: longer than any command Paperclip runs. */
const MAX_TIMEOUT_MS = 24 * 60 * 60 * 1000;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** The shared fields of a run: script, env (replacing the environment), cwd, timeoutMs. */
export function parseRunRequest(body: unknown): RunRequest {
  if (!isObject(body)) throw new RequestError("bad_request", "the body must be a JSON object");
  if (body.envMode !== "replace") throw new RequestError("bad_env_mode", `envMode: must be "replace" (the command gets exactly env; got ${JSON.stringify(body.envMode)})`);
  if (typeof body.script !== "string" || body.script.length === 0) throw new RequestError("bad_script", "script: must be a non-empty string");
  if (body.script.includes("\0")) throw new RequestError("bad_script", "script: must not contain NUL bytes");
  const env: Record<string, string> = {};
  if (body.env !== undefined && body.env !== null) {
    if (!isObject(body.env)) throw new RequestError("bad_env", "env: must be an object of strings");
    for (const [name, value] of Object.entries(body.env)) {
      if (!ENV_NAME.test(name)) throw new RequestError("bad_env", `env: ${JSON.stringify(name.slice(0, 64))} is not a variable name`);
      if (typeof value !== "string" || value.includes("\0")) throw new RequestError("bad_env", `env.${name}: must be a string without NUL bytes`);
      env[name] = value;
    }
  }
  let cwd: string | undefined;
  if (body.cwd !== undefined && body.cwd !== null) {
    if (typeof body.cwd !== "string" || !body.cwd.startsWith("/") || body.cwd.includes("\0")) throw new RequestError("bad_cwd", "cwd: must be an absolute path");
    cwd = body.cwd;
  }
  let timeoutMs: number | undefined;
  if (body.timeoutMs !== undefined && body.timeoutMs !== null) {
    if (typeof body.timeoutMs !== "number" || !Number.isInteger(body.timeoutMs) || body.timeoutMs < 1 || body.timeoutMs > MAX_TIMEOUT_MS) {
      throw new RequestError("bad_timeout", `timeoutMs: must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`);
    }
    timeoutMs = body.timeoutMs;
  }
  return { script: body.script, env, cwd, timeoutMs };
}

/** `stdin` of `POST /run`: a string (UTF-8, or base64 with `encoding: "base64"`), or null/absent for none. */
export function parseStdin(body: Record<string, unknown>, encoding: "utf8" | "base64"): Buffer {
  const stdin = body.stdin;
  if (stdin === undefined || stdin === null) return Buffer.alloc(0);
  if (typeof stdin !== "string") throw new RequestError("bad_stdin", "stdin: must be a string or null");
  if (encoding === "base64") {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(stdin) || stdin.length % 4 !== 0) throw new RequestError("bad_stdin", "stdin: must be base64 (encoding is base64)");
    return Buffer.from(stdin, "base64");
  }
  return Buffer.from(stdin, "utf8");
}

/** `encoding` of `POST /run` (an extension of the seed's contract): how stdin, stdout and stderr travel. */
export function parseEncoding(body: Record<string, unknown>): "utf8" | "base64" {
  if (body.encoding === undefined || body.encoding === null || body.encoding === "utf8") return "utf8";
  if (body.encoding === "base64") return "base64";
  throw new RequestError("bad_encoding", `encoding: must be "utf8" or "base64"`);
}
