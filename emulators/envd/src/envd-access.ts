import { posix } from "node:path";
import { HttpError, type HttpContext } from "@paperclip-sandbox/emulator-kit";
import { ENVD_USER, type EnvdSandbox, type SandboxRegistry } from "./sandboxes.js";

/** Which SDK family is calling: Novita's fork names its headers and has an older filesystem schema. */
export type Dialect = "e2b" | "novita";

export interface EnvdTarget {
  sandbox: EnvdSandbox;
  dialect: Dialect;
}

/** The sandbox user's home (E2B's `user`: `/home/user`): where envd resolves relative paths and starts commands. */
export const SANDBOX_HOME = ENVD_USER.home;

/**
 * The sandbox an envd call is for. With a sandbox URL override every sandbox shares one origin, so
 * the SDK names it in `E2b-Sandbox-Id` (or `Novita-Sandbox-Id`); a secure sandbox also needs its
 * `X-Access-Token`. A sandbox that is paused or gone answers as E2B's proxy does: 502.
 */
export function envdTarget(ctx: HttpContext, sandboxes: SandboxRegistry): EnvdTarget {
  noDelay(ctx);
  const novita = ctx.header("novita-sandbox-id");
  const id = novita ?? ctx.header("e2b-sandbox-id");
  if (!id) throw new HttpError(400, "missing sandbox id: send the E2b-Sandbox-Id (or Novita-Sandbox-Id) header");
  const sandbox = sandboxes.get(id);
  if (!sandbox) throw new HttpError(502, `The sandbox ${id} was not found`);
  if (sandbox.state !== "running") throw new HttpError(502, `The sandbox ${id} is paused`);
  if (sandbox.envdAccessToken !== undefined && ctx.header("x-access-token") !== sandbox.envdAccessToken) {
    throw new HttpError(401, "invalid or missing access token");
  }
  return { sandbox, dialect: novita !== undefined ? "novita" : "e2b" };
}

/**
 * Answers go out as written: the kit's listener hands HTTP/1.1 sockets over without TCP_NODELAY, and
 * Nagle's algorithm then holds a stream's second small write until the client's delayed ACK (~40 ms
 * per event on Linux), which no real envd adds.
 */
export function noDelay(ctx: HttpContext): void {
  const socket = ctx.req.socket as { setNoDelay?: (noDelay: boolean) => unknown } | undefined;
  socket?.setNoDelay?.(true);
}

/**
 * The user named by `Authorization: Basic base64(user:)` or `?username=`. Every process runs as the
 * jail's one user, E2B's default `user`; root and others are refused plainly (an emulator limit).
 */
export function checkUser(name: string | undefined): void {
  if (name === undefined || name === "" || name === ENVD_USER.name) return;
  throw new HttpError(403, `user ${JSON.stringify(name)} is not available: the emulator runs everything as ${JSON.stringify(ENVD_USER.name)}`);
}

export function userFromAuthorization(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Basic\s+(\S+)$/i.exec(header);
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
  return decoded.split(":")[0];
}

/** envd's path rules: `~` is the home, a relative path is under it, the result is cleaned. */
export function resolveSandboxPath(raw: string | undefined, what = "path"): string {
  if (raw === undefined || raw === "") throw new HttpError(400, `${what}: required`);
  if (raw.includes("\0")) throw new HttpError(400, `${what}: must not contain a NUL byte`);
  let value = raw;
  if (value === "~") value = SANDBOX_HOME;
  else if (value.startsWith("~/")) value = posix.join(SANDBOX_HOME, value.slice(2));
  return posix.isAbsolute(value) ? posix.normalize(value) : posix.join(SANDBOX_HOME, value);
}
