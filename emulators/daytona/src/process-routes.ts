import { HttpError, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { daemonErrorEnvelope } from "./errors.js";
import type { Fleet } from "./fleet.js";
import { toolboxTarget, whileActive, WORK_DIR } from "./toolbox.js";

/** Largest combined output one execute returns (the daemon buffers it whole). */
const MAX_EXECUTE_OUTPUT = 64 * 1024 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface ProcessDeps {
  fleet: Fleet;
  authorize(ctx: HttpContext): void;
}

/** `POST /process/execute` (`ExecuteRequest` → `ExecuteResponse`): `sh -c`, combined output, 408 at the timeout. */
export function registerProcessRoutes(router: Router, deps: ProcessDeps): void {
  router.post(
    "/toolbox/:sandboxId/process/execute",
    async (ctx) => {
      deps.authorize(ctx);
      const { record, jail } = toolboxTarget(deps.fleet, ctx);
      const body = (await ctx.readJson<{ command?: unknown; cwd?: unknown; envs?: unknown; timeout?: unknown }>()) ?? {};
      if (typeof body.command !== "string" || body.command === "") throw new HttpError(400, "command: must be a non-empty string", { code: "INVALID_REQUEST_BODY" });
      const envs = checkEnvs(body.envs);
      const timeoutSec = body.timeout === undefined || body.timeout === null ? 0 : Number(body.timeout);
      if (!Number.isFinite(timeoutSec) || timeoutSec < 0) throw new HttpError(400, "timeout: must be a non-negative number of seconds", { code: "INVALID_REQUEST_BODY" });
      const cwd = typeof body.cwd === "string" && body.cwd !== "" ? body.cwd : WORK_DIR;
      const chunks: Buffer[] = [];
      let size = 0;
      const sink = (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_EXECUTE_OUTPUT) chunks.push(chunk);
      };
      const exit = await whileActive(deps.fleet, record, () =>
        jail.runner.run(`cd -- ${quote(cwd)} || exit 1\n${body.command as string}`, {
          stdout: sink,
          stderr: sink,
          env: envs,
          // A client that goes away ends the command, as the daemon's request context does.
          signal: ctx.signal,
          ...(timeoutSec > 0 ? { timeoutMs: Math.round(timeoutSec * 1000) } : {}),
        }),
      );
      if (exit.reason === "timeout") throw new HttpError(408, "command execution timeout", { code: "PROCESS_EXECUTION_TIMEOUT" });
      return { exitCode: exit.exitCode ?? -1, result: Buffer.concat(chunks).toString("utf8") };
    },
    { errorEnvelope: daemonErrorEnvelope },
  );
}

export function checkEnvs(value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) throw new HttpError(400, "envs: must be an object of strings", { code: "INVALID_REQUEST_BODY" });
  for (const [key, entry] of Object.entries(value)) {
    if (!ENV_NAME.test(key) || typeof entry !== "string") throw new HttpError(400, `envs: invalid variable ${JSON.stringify(key)}`, { code: "INVALID_REQUEST_BODY" });
  }
  return { ...(value as Record<string, string>) };
}

function quote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
