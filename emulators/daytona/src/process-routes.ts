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

/** Interpreters `code-run` uses per language (the SDK's `code-toolbox-language` label). */
const CODE_RUNNERS: Record<string, { file: string; argv: (file: string) => string[] }> = {
  python: { file: "main.py", argv: (file) => ["python3", file] },
  javascript: { file: "main.js", argv: (file) => ["node", file] },
  typescript: { file: "main.ts", argv: (file) => ["node", "--experimental-strip-types", "--no-warnings", file] },
};

/**
 * `POST /process/code-run` (`CodeRunRequest` → `CodeRunResponse`): the code in the language's
 * interpreter, stdout and stderr combined in `result`, with `argv`, `envs` and a timeout (408). No
 * chart artifacts (the emulator has no matplotlib hook).
 */
export function registerCodeRunRoute(router: Router, deps: ProcessDeps): void {
  router.post(
    "/toolbox/:sandboxId/process/code-run",
    async (ctx) => {
      deps.authorize(ctx);
      const { record, jail } = toolboxTarget(deps.fleet, ctx);
      const body = (await ctx.readJson<{ code?: unknown; language?: unknown; argv?: unknown; envs?: unknown; timeout?: unknown }>()) ?? {};
      if (typeof body.code !== "string") throw new HttpError(400, "code: must be a string", { code: "INVALID_REQUEST_BODY" });
      const runner = CODE_RUNNERS[typeof body.language === "string" ? body.language : "python"];
      if (!runner) throw new HttpError(400, `unsupported language: ${String(body.language)}`, { code: "BAD_REQUEST" });
      const argv = body.argv === undefined || body.argv === null ? [] : body.argv;
      if (!Array.isArray(argv) || argv.some((a) => typeof a !== "string")) throw new HttpError(400, "argv: must be a list of strings", { code: "INVALID_REQUEST_BODY" });
      const timeoutSec = body.timeout === undefined || body.timeout === null ? 0 : Number(body.timeout);
      const dir = `/tmp/.daytona-code-run/${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
      const file = `${dir}/${runner.file}`;
      await jail.files.write(file, body.code, { mode: 0o600 });
      const chunks: Buffer[] = [];
      const sink = (chunk: Buffer) => void chunks.push(chunk);
      try {
        const exit = await whileActive(deps.fleet, record, () =>
          jail.runner.run(`cd -- ${quote(WORK_DIR)} && exec ${[...runner.argv(file), ...(argv as string[])].map(quote).join(" ")}`, {
            stdout: sink,
            stderr: sink,
            env: checkEnvs(body.envs),
            signal: ctx.signal,
            ...(timeoutSec > 0 ? { timeoutMs: Math.round(timeoutSec * 1000) } : {}),
          }),
        );
        if (exit.reason === "timeout") throw new HttpError(408, "command execution timeout", { code: "PROCESS_EXECUTION_TIMEOUT" });
        return { exitCode: exit.exitCode ?? -1, result: Buffer.concat(chunks).toString("utf8"), artifacts: { charts: [] } };
      } finally {
        await jail.files.remove(dir, { recursive: true }).catch(() => undefined);
      }
    },
    { errorEnvelope: daemonErrorEnvelope },
  );

  // The daemon's port detector: TCP ports listening in the sandbox (from /proc/net/tcp{,6}).
  const listening = async (ctx: HttpContext): Promise<number[]> => {
    deps.authorize(ctx);
    const { jail } = toolboxTarget(deps.fleet, ctx);
    let text = "";
    await jail.runner.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", { stdout: (chunk: Buffer) => (text += chunk), stderr: () => undefined });
    const ports = new Set<number>();
    for (const line of text.split("\n")) {
      const fields = line.trim().split(/\s+/);
      if (fields[3] === "0A") ports.add(Number.parseInt(fields[1]!.split(":")[1]!, 16)); // state 0A: LISTEN
    }
    return [...ports].sort((a, b) => a - b);
  };
  router.get("/toolbox/:sandboxId/port", async (ctx) => ({ ports: await listening(ctx) }), { errorEnvelope: daemonErrorEnvelope });
  router.get(
    "/toolbox/:sandboxId/port/:port/in-use",
    async (ctx) => {
      const port = Number(ctx.params.port);
      if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new HttpError(400, "invalid port", { code: "BAD_REQUEST" });
      return { isInUse: (await listening(ctx)).includes(port) };
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
