/**
 * The smallest emulator on the shared pieces: a made-up vendor ("Example Cloud") whose sandboxes
 * are real backend jails. It shows the structure every vendor emulator follows (auth, vendor-shaped
 * errors, labels, exec, leftovers, recorder and faults from the emulator kit) and backs the
 * `paperclip-sandbox emulate example` command.
 *
 *   POST   /v1/sandboxes                {labels?, ttlSeconds?}             -> 201 {id, state, labels, expiresAt}
 *   GET    /v1/sandboxes?label=k=v       list (all labels must match)       -> {sandboxes: [...]}
 *   GET    /v1/sandboxes/:id                                                -> {id, state, labels, expiresAt}
 *   DELETE /v1/sandboxes/:id             confirmed: no process, no directory -> 204 (404 when unknown)
 *   POST   /v1/sandboxes/:id/exec        {script, stdin? (base64), timeoutMs?} -> {exitCode, stdout, stderr (base64), timedOut}
 * Every route but /health needs `Authorization: Bearer <token>`.
 */
import { HttpError, createRouter, requireBearer, type EmulatorDefinition, type HttpContext } from "@paperclip-sandbox/emulator-kit";
import type { Sandbox } from "@paperclip-sandbox/sandbox-backend";

export interface ExampleEmulatorOptions {
  /** Port to listen on (default: any free port). */
  port?: number;
  /** Default sandbox lifetime in seconds (default 3600). */
  ttlSeconds?: number;
}

const exampleErrors = ({ status, message }: { status: number; message: string }) => ({ error: { status, message } });

export const emulator: EmulatorDefinition<ExampleEmulatorOptions> = {
  name: "example",
  description: "A made-up vendor API (REST, bearer token) whose sandboxes are bubblewrap jails: the emulator pattern in ~100 lines",
  async start(kit, options) {
    const token = kit.credential("ex_");
    // The kit's bootstrap: a short state dir (0711 under root), closed and removed with the emulator.
    const { backend } = await kit.backend({ prefix: "emu-ex" });
    // Registered after backend(): runs before it closes (last registered first).
    kit.onClose(async () => {
      for (const sandbox of await backend.list()) await backend.destroy(sandbox.id).catch(() => undefined);
    });

    const router = createRouter({ errorEnvelope: exampleErrors });
    const auth = (ctx: HttpContext) => requireBearer(ctx, { accept: [token] });
    const view = (sandbox: Sandbox) => ({ id: sandbox.id, state: sandbox.state, labels: sandbox.labels, expiresAt: new Date(sandbox.expiresAt).toISOString() });
    const find = async (id: string) => {
      const sandbox = await backend.get(id);
      if (!sandbox) throw new HttpError(404, `sandbox ${id} not found`);
      return sandbox;
    };

    router.get("/health", (ctx) => ctx.send(204));
    router.post("/v1/sandboxes", async (ctx) => {
      auth(ctx);
      const body = (await ctx.readJson<{ labels?: Record<string, string>; ttlSeconds?: number }>()) ?? {};
      const sandbox = await backend.create({ labels: body.labels ?? {}, ttlMs: (body.ttlSeconds ?? options.ttlSeconds ?? 3600) * 1000 });
      ctx.sendJson(201, view(sandbox));
    });
    router.get("/v1/sandboxes", async (ctx) => {
      auth(ctx);
      const wanted = Object.fromEntries(ctx.query.getAll("label").map((pair) => pair.split("=", 2) as [string, string]));
      const found = await backend.list({ labels: wanted });
      return { sandboxes: found.map((s) => ({ id: s.id, state: s.state, labels: s.labels, expiresAt: s.expiresAt ? new Date(s.expiresAt).toISOString() : null })) };
    });
    router.get("/v1/sandboxes/:id", async (ctx) => {
      auth(ctx);
      return view(await find(ctx.params.id!));
    });
    router.delete("/v1/sandboxes/:id", async (ctx) => {
      auth(ctx);
      if (!(await backend.summary(ctx.params.id!))) throw new HttpError(404, `sandbox ${ctx.params.id} not found`);
      await backend.destroy(ctx.params.id!);
      ctx.send(204);
    });
    router.post("/v1/sandboxes/:id/exec", async (ctx) => {
      auth(ctx);
      const body = (await ctx.readJson<{ script?: unknown; stdin?: unknown; timeoutMs?: unknown }>()) ?? {};
      if (typeof body.script !== "string") throw new HttpError(400, "script: must be a string");
      const sandbox = await find(ctx.params.id!);
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const exit = await sandbox.runner.run(body.script, {
        stdin: typeof body.stdin === "string" ? Buffer.from(body.stdin, "base64") : null,
        stdout: (chunk) => out.push(chunk),
        stderr: (chunk) => err.push(chunk),
        ...(typeof body.timeoutMs === "number" ? { timeoutMs: body.timeoutMs } : {}),
      });
      return {
        exitCode: exit.exitCode,
        timedOut: exit.reason === "timeout",
        stdout: Buffer.concat(out).toString("base64"),
        stderr: Buffer.concat(err).toString("base64"),
      };
    });

    const server = await kit.http(router, { port: options.port ?? 0 });
    return {
      url: server.url,
      credentials: { token },
      env: { EXAMPLE_API_URL: server.url, EXAMPLE_TOKEN: token },
      leftovers: async () => (await backend.list()).map((s) => `sandbox ${s.id} (${s.state})`),
    };
  },
};
