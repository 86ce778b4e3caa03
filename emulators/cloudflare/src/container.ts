import { Buffer } from "node:buffer";
import type { ExecHandle, Sandbox as Jail, SandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import { HttpError, openSse, type HttpContext, type Router, type VendorClock } from "@paperclip-sandbox/emulator-kit";
import { containerError } from "./container-errors.js";
import { ContainerPty, ptyQueryOf, servePtyConnection } from "./pty.js";

/** The container image's version the stand-in reports (the SDK only logs a mismatch). */
export const CONTAINER_VERSION = "0.7.21";
const DEFAULT_SESSION_CWD = "/workspace";
/** Per output stream of one command; the real container keeps whole log files. */
const OUTPUT_LIMIT = 16 * 1024 * 1024;
/** The container's execStream reads the command's log this often (CONFIG.STREAM_CHUNK_DELAY_MS). */
export const STREAM_POLL_MS = 100;
/** The real container streams a file in chunks of this many bytes. */
const READ_CHUNK = 65_535;
/** Roots the stand-in's file routes may touch (the jail's writable trees and the read-only rest). */
const ROOTS = ["/"];

interface Command {
  handle: ExecHandle;
  streamed: boolean;
}

/**
 * A session of the 0.7.x container: one persistent shell, so one command at a time. A command that
 * timed out (non-streamed) keeps running and keeps the shell busy: the next command starts only
 * after it exits. Deleting the session kills the shell: streamed (background) commands get SIGTERM
 * by pid, a foreground command is not signalled at all (it was the shell's child, not its group).
 */
class Session {
  /** Resolves when the shell is free again (the last command's process exited). */
  private idle: Promise<unknown> = Promise.resolve();
  readonly commands = new Set<Command>();
  /** The session's terminal (`getPty`), made on its first connection. */
  pty: Promise<ContainerPty> | undefined;
  deleted = false;
  constructor(
    readonly id: string,
    readonly cwd: string,
    readonly env: Record<string, string>,
    readonly commandTimeoutMs: number | undefined,
  ) {}

  /** Runs `start` once the shell is free; the shell stays busy until `busyUntil` of what it started settles. */
  async take<T>(start: () => Promise<T>, busyUntil: (value: T) => Promise<unknown>): Promise<T> {
    const previous = this.idle;
    let started!: (value: Promise<T>) => void;
    const next = new Promise<Promise<T>>((resolve) => (started = resolve));
    this.idle = next.then((p) => p.then(busyUntil)).catch(() => undefined);
    await previous;
    const promise = start();
    started(promise);
    return promise;
  }
}

/** One container: a jail made on first use, its sessions, and its lifecycle as the DO drives it. */
class Container {
  private jail: { id: string; ready: Promise<Jail> } | undefined;
  /** Each start gets a jail of its own: one being destroyed may still hold the previous id. */
  private starts = 0;
  readonly sessions = new Map<string, Session>();
  constructor(
    readonly id: string,
    private readonly backend: SandboxBackend,
  ) {}

  sandbox(): Promise<Jail> {
    if (!this.jail) {
      const id = `cf-${this.id.slice(0, 40)}-${(this.starts += 1)}`;
      const ready = this.backend.create({ id, ttlMs: 24 * 3_600_000, labels: { emulator: "cloudflare" } });
      this.jail = { id, ready };
      ready.catch(() => {
        if (this.jail?.ready === ready) this.jail = undefined;
      });
    }
    return this.jail.ready;
  }

  get started(): boolean {
    return this.jail !== undefined;
  }

  session(id: string | undefined, create?: { cwd?: string; env?: Record<string, string>; commandTimeoutMs?: number }): Session {
    const key = id ?? "default";
    let session = this.sessions.get(key);
    if (!session) {
      session = new Session(key, create?.cwd ?? DEFAULT_SESSION_CWD, create?.env ?? {}, create?.commandTimeoutMs);
      this.sessions.set(key, session);
    }
    return session;
  }

  async deleteSession(id: string): Promise<boolean> {
    const session = this.sessions.get(id);
    if (!session) return false;
    this.sessions.delete(id);
    session.deleted = true;
    for (const command of session.commands) if (command.streamed) await command.handle.signal("SIGTERM").catch(() => undefined);
    // Session.destroy() destroys its PTY.
    await session.pty?.then((pty) => pty.destroy()).catch(() => undefined);
    return true;
  }

  /** The DO's `ctx.container.destroy()`: every process and file of the container gone. */
  async destroy(): Promise<void> {
    const jail = this.jail;
    this.jail = undefined;
    this.sessions.clear();
    if (!jail) return;
    await jail.ready.catch(() => undefined);
    await this.backend.destroy(jail.id);
  }
}

export interface ContainerFleet {
  get(id: string): Container;
  /** Containers with a jail (what `leftovers` reports). */
  live(): string[];
  destroyAll(): Promise<void>;
}

export function createFleet(backend: SandboxBackend): ContainerFleet {
  const containers = new Map<string, Container>();
  return {
    get(id) {
      let container = containers.get(id);
      if (!container) containers.set(id, (container = new Container(id, backend)));
      return container;
    },
    live: () => [...containers.values()].filter((c) => c.started).map((c) => c.id),
    async destroyAll() {
      await Promise.all([...containers.values()].map((c) => c.destroy().catch(() => undefined)));
    },
  };
}

const now = () => new Date().toISOString();
const text = (value: unknown, field: string): string => {
  if (typeof value !== "string" || value === "") throw containerError(400, "VALIDATION_FAILED", `${field} is required`, { field });
  return value;
};
const envOf = (value: unknown): Record<string, string> =>
  value && typeof value === "object" ? Object.fromEntries(Object.entries(value as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === "string")) : {};

/** Foreground output as the container returns it: lines re-joined, so the last newline is lost and NULs vanish. */
export function foregroundText(bytes: Buffer): string {
  const lines = bytes.toString("utf8").replace(/\0/g, "").split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines.join("\n");
}

async function startCommand(container: Container, session: Session, body: Record<string, unknown>, streamed: boolean): Promise<Command> {
  const jail = await container.sandbox();
  const command = text(body.command, "command");
  const cwd = typeof body.cwd === "string" && body.cwd !== "" ? body.cwd : session.cwd;
  const env = { ...session.env, ...envOf(body.env) };
  const handle = await session.take(
    () =>
      jail.exec({
        script: `cd ${shellQuote(cwd)} 2>/dev/null || { echo "Failed to change directory to ${cwd}" >&2; exit 1; }\n${command}`,
        env,
        detached: true,
        outputLimitBytes: OUTPUT_LIMIT,
        tag: `session ${session.id}`,
      }),
    (h) => h.exited,
  );
  const entry = { handle, streamed };
  session.commands.add(entry);
  void handle.exited
    .catch(() => undefined)
    .finally(() => {
      session.commands.delete(entry);
      handle.close();
    });
  return entry;
}

const shellQuote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;

function collect(handle: ExecHandle): Promise<{ stdout: Buffer; stderr: Buffer }> {
  const parts = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  const sub = handle.subscribe({ stdout: 0, stderr: 0 }, { onData: (stream, data) => void parts[stream].push(Buffer.from(data)) });
  const done = sub.done.then(() => ({ stdout: Buffer.concat(parts.stdout), stderr: Buffer.concat(parts.stderr) }));
  done.catch(() => undefined); // read only when the command ends in time
  return done;
}

/**
 * The 0.7.x sandbox container's HTTP API (`packages/sandbox-container/src/routes/setup.ts` at
 * `@cloudflare/sandbox@0.7.21`), for many containers on one port: the Durable Object's shimmed
 * `ctx.container.getTcpPort(port).fetch` prefixes each request with `/c/<container id>/p/<port>`.
 */
export interface ContainerRouteOptions {
  /** The container's time: its command timeouts and its log poll run on it. */
  clock: VendorClock;
  /** How often a streamed exec reads its command's log, in container ms (0.7.21's STREAM_CHUNK_DELAY_MS: 100). */
  streamPollMs: number;
}

export function registerContainerRoutes(router: Router, fleet: ContainerFleet, options: ContainerRouteOptions): void {
  const P = "/c/:cid/p/:port";
  const containerOf = (ctx: HttpContext) => fleet.get(ctx.params.cid!);
  const json = async (ctx: HttpContext) => ((await ctx.readJson<Record<string, unknown>>(64 * 1024 * 1024)) ?? {}) as Record<string, unknown>;

  // The containers library's port checks: any answer means the port is up.
  router.get(`${P}/`, () => "ok");
  router.get(`${P}/api/ping`, () => ({ success: true, message: "pong", timestamp: now() }));
  router.get(`${P}/api/version`, () => ({ success: true, version: CONTAINER_VERSION, timestamp: now() }));

  router.post(`${P}/api/session/create`, async (ctx) => {
    const container = containerOf(ctx);
    const body = await json(ctx);
    const id = typeof body.id === "string" && body.id !== "" ? body.id : `session_${Date.now()}_${Math.random().toString(16).slice(2, 10)}`;
    if (container.sessions.has(id)) throw containerError(409, "SESSION_ALREADY_EXISTS", `Session '${id}' already exists`, { sessionId: id });
    await container.sandbox();
    const session = container.session(id, {
      ...(typeof body.cwd === "string" ? { cwd: body.cwd } : {}),
      env: envOf(body.env),
      ...(typeof body.commandTimeoutMs === "number" ? { commandTimeoutMs: body.commandTimeoutMs } : {}),
    });
    return { success: true, data: { id: session.id, cwd: session.cwd }, timestamp: now() };
  });
  router.get(`${P}/api/session/list`, (ctx) => ({ success: true, data: [...containerOf(ctx).sessions.keys()], timestamp: now() }));
  router.post(`${P}/api/session/delete`, async (ctx) => {
    const sessionId = text((await json(ctx)).sessionId, "sessionId");
    if (!(await containerOf(ctx).deleteSession(sessionId))) throw containerError(404, "SESSION_NOT_FOUND", `Session '${sessionId}' not found`, { sessionId });
    return { success: true, sessionId, timestamp: now() };
  });

  // The terminal (`sandbox.terminal()`): see pty.ts.
  router.ws(`${P}/ws/pty`, {
    before(ctx) {
      const query = ptyQueryOf(ctx.query);
      if (typeof query === "string") throw new HttpError(400, query);
    },
    async onConnection(socket, ctx) {
      const query = ptyQueryOf(ctx.query) as Exclude<ReturnType<typeof ptyQueryOf>, string>;
      const container = fleet.get(ctx.params.cid!);
      const session = container.session(query.sessionId);
      try {
        session.pty ??= container.sandbox().then((jail) => ContainerPty.start(jail, { shell: query.shell, cols: query.cols, rows: query.rows, cwd: session.cwd, env: session.env }));
        servePtyConnection(socket, await session.pty);
      } catch (error) {
        session.pty = undefined;
        const message = `Failed to create PTY: ${(error as Error).message}`;
        socket.send(JSON.stringify({ type: "error", message }));
        socket.close(1011, message.slice(0, 120));
      }
    },
  });

  router.post(`${P}/api/execute`, async (ctx) => {
    const container = containerOf(ctx);
    const body = await json(ctx);
    const session = container.session(body.sessionId as string | undefined, {
      ...(typeof body.cwd === "string" ? { cwd: body.cwd } : {}),
      ...(typeof body.timeoutMs === "number" ? { commandTimeoutMs: body.timeoutMs } : {}),
    });
    const command = await startCommand(container, session, body, false);
    const timeoutMs = typeof body.timeoutMs === "number" && body.timeoutMs > 0 ? body.timeoutMs : session.commandTimeoutMs;
    let cancel: (() => void) | undefined;
    const timedOut = new Promise<"timeout">((resolve) => timeoutMs !== undefined && (cancel = options.clock.after(timeoutMs, () => resolve("timeout"))));
    const output = collect(command.handle);
    const outcome = await Promise.race([command.handle.exited, timedOut]);
    cancel?.();
    if (outcome === "timeout") {
      // The container stops waiting; the command is not killed and keeps the shell busy.
      throw containerError(500, "COMMAND_EXECUTION_ERROR", `Failed to execute command '${String(body.command)}' in session '${session.id}': Command timeout after ${timeoutMs}ms`, {
        command: body.command,
      });
    }
    const { stdout, stderr } = await output;
    return {
      success: outcome.exitCode === 0,
      exitCode: outcome.exitCode ?? 128 + 9,
      stdout: foregroundText(stdout),
      stderr: foregroundText(stderr),
      command: body.command,
      duration: 0,
      timestamp: now(),
      sessionId: session.id,
    };
  });

  // Streamed: `data:`-only SSE frames; one event per output line (its newline kept); no timeout
  // (0.7.x ignores it). Like the container's execStream loop: the log is read at once, then every
  // poll interval, and the command's end is seen at the first poll after it (then the rest, then
  // `complete`).
  router.post(`${P}/api/execute/stream`, async (ctx) => {
    const container = containerOf(ctx);
    const body = await json(ctx);
    const session = container.session(body.sessionId as string | undefined, typeof body.cwd === "string" ? { cwd: body.cwd } : {});
    const command = await startCommand(container, session, body, true);
    const sse = openSse(ctx, { keepaliveMs: 0 });
    const send = (event: Record<string, unknown>) => sse.send({ data: { ...event, timestamp: now() } });
    send({ type: "start", command: body.command, pid: command.handle.pid });
    const pending = { stdout: "", stderr: "" };
    const log: Array<{ type: "stdout" | "stderr"; data: string }> = [];
    const lines = (stream: "stdout" | "stderr", chunk: string, flush: boolean) => {
      const all = pending[stream] + chunk;
      const parts = all.split("\n");
      pending[stream] = flush ? "" : parts.pop()!;
      for (const line of flush ? parts.filter((l, i) => i < parts.length - 1 || l !== "") : parts) log.push({ type: stream, data: `${line}\n` });
    };
    const deliver = () => {
      for (const entry of log.splice(0)) send(entry);
    };
    // The container's labelers are `IFS= read -r` loops in bash: a NUL never reaches the log.
    const sub = command.handle.subscribe({ stdout: 0, stderr: 0 }, { onData: (stream, data) => lines(stream, Buffer.from(data).toString("utf8").replace(/\0/g, ""), false) });
    // The command's end, or why it has none (its jail went away under it: the container was destroyed).
    let exit: { exitCode: number | null } | { lost: string } | undefined;
    void (async () => {
      await sub.done.catch(() => undefined);
      lines("stdout", "", true);
      lines("stderr", "", true);
      exit = await command.handle.exited.catch((error: Error) => ({ lost: error.message }));
    })();
    while (!exit) {
      deliver();
      await options.clock.sleep(options.streamPollMs);
    }
    deliver();
    if ("lost" in exit) send({ type: "error", error: `Session '${session.id}' was destroyed: ${exit.lost}` });
    else if (session.deleted && exit.exitCode === null) send({ type: "error", error: `Session '${session.id}' was destroyed` });
    else send({ type: "complete", exitCode: exit.exitCode ?? 128 + 15 });
    sse.close();
  });

  router.post(`${P}/api/write`, async (ctx) => {
    const container = containerOf(ctx);
    const body = await json(ctx);
    const path = text(body.path, "path");
    const content = typeof body.content === "string" ? body.content : "";
    const base64 = body.encoding === "base64";
    if (base64 && !/^[A-Za-z0-9+/=]*$/.test(content)) throw containerError(400, "VALIDATION_FAILED", `Invalid base64 content for '${path}': must contain only A-Z, a-z, 0-9, +, /, =`);
    const jail = await container.sandbox();
    // Writes take the session's shell like a command does (withSession in the container).
    const session = container.session(body.sessionId as string | undefined);
    await session.take(
      () =>
        jail.files.write(path, base64 ? Buffer.from(content, "base64") : content, { roots: ROOTS }).catch((error: Error) => {
          throw containerError(500, "FILESYSTEM_ERROR", `Failed to write file '${path}': ${error.message}`, { path });
        }),
      async () => undefined,
    );
    return { success: true, path, timestamp: now() };
  });

  router.post(`${P}/api/read`, async (ctx) => {
    const body = await json(ctx);
    const path = text(body.path, "path");
    const jail = await containerOf(ctx).sandbox();
    const bytes = await jail.files.read(path, { roots: ROOTS, maxBytes: 64 * 1024 * 1024 }).catch((error: Error & { code?: string }) => {
      throw error.code === "ENOENT" ? containerError(404, "FILE_NOT_FOUND", `File not found: ${path}`, { path }) : containerError(500, "FILESYSTEM_ERROR", error.message, { path });
    });
    const binary = body.encoding === "base64" || isBinary(path, bytes);
    return { success: true, path, content: binary ? bytes.toString("base64") : bytes.toString("utf8"), encoding: binary ? "base64" : "utf-8", isBinary: binary, size: bytes.length, timestamp: now() };
  });

  router.post(`${P}/api/read/stream`, async (ctx) => {
    const body = await json(ctx);
    const path = text(body.path, "path");
    const jail = await containerOf(ctx).sandbox();
    const sse = openSse(ctx, { keepaliveMs: 0 });
    let info;
    try {
      info = await jail.files.stat(path, { roots: ROOTS, follow: true });
      if (info.type !== "file") throw Object.assign(new Error(`Not a file: ${path}`), { code: "EISDIR" });
    } catch (error) {
      const code = (error as { code?: string }).code;
      sse.send({ data: { type: "error", error: code === "ENOENT" ? `File not found: ${path}` : (error as Error).message } });
      return sse.close();
    }
    const head = info.size > 0 ? await jail.files.read(path, { roots: ROOTS, length: Math.min(info.size, 8192) }) : Buffer.alloc(0);
    const binary = isBinary(path, head);
    sse.send({ data: { type: "metadata", mimeType: binary ? "application/octet-stream" : "text/plain", size: info.size, isBinary: binary, encoding: binary ? "base64" : "utf-8" } });
    let sent = 0;
    let carry = Buffer.alloc(0);
    const stream = await jail.files.readStream(path, { roots: ROOTS });
    for await (const piece of stream as AsyncIterable<Buffer>) {
      carry = Buffer.concat([carry, piece]);
      while (carry.length >= READ_CHUNK) {
        const chunk = carry.subarray(0, READ_CHUNK);
        carry = carry.subarray(READ_CHUNK);
        sse.send({ data: { type: "chunk", data: binary ? chunk.toString("base64") : chunk.toString("utf8") } });
        sent += chunk.length;
      }
    }
    if (carry.length > 0) {
      sse.send({ data: { type: "chunk", data: binary ? carry.toString("base64") : carry.toString("utf8") } });
      sent += carry.length;
    }
    sse.send({ data: { type: "complete", bytesRead: sent } });
    sse.close();
  });

  router.post(`${P}/api/delete`, async (ctx) => {
    const path = text((await json(ctx)).path, "path");
    const jail = await containerOf(ctx).sandbox();
    await jail.files.remove(path, { roots: ROOTS }).catch((error: Error & { code?: string }) => {
      throw error.code === "ENOENT" ? containerError(404, "FILE_NOT_FOUND", `File not found: ${path}`, { path }) : containerError(500, "FILESYSTEM_ERROR", error.message, { path });
    });
    return { success: true, path, timestamp: now() };
  });
  router.post(`${P}/api/mkdir`, async (ctx) => {
    const body = await json(ctx);
    const path = text(body.path, "path");
    const jail = await containerOf(ctx).sandbox();
    await jail.files.mkdir(path, { roots: ROOTS, parents: body.recursive === true });
    return { success: true, path, recursive: body.recursive === true, timestamp: now() };
  });
  router.post(`${P}/api/exists`, async (ctx) => {
    const path = text((await json(ctx)).path, "path");
    const jail = await containerOf(ctx).sandbox();
    const exists = await jail.files.stat(path, { roots: ROOTS }).then(
      () => true,
      () => false,
    );
    return { success: true, path, exists, timestamp: now() };
  });
  // destroy() stops the desktop first when the container runs; there is none here.
  router.post(`${P}/api/desktop/stop`, () => ({ success: true, timestamp: now() }));

  // The shim's lifecycle calls (not container API): ctx.container.destroy().
  router.post("/c/:cid/lifecycle/destroy", async (ctx) => {
    await containerOf(ctx).destroy();
    return { ok: true };
  });

  // Every other route (processes, ports, git, interpreter, backups, desktop, watch): the router's
  // 404 in the container's error shape, recorded as unserved.
}

/** What the container decides from Bun's extension type, else `file --mime-type`: here extension, then a NUL/UTF-8 sniff. */
function isBinary(path: string, head: Buffer): boolean {
  if (/\.(txt|json|md|js|mjs|ts|sh|py|html|css|xml|yaml|yml|csv)$/i.test(path)) return false;
  if (/\.(tar|gz|tgz|zip|png|jpg|bin)$/i.test(path)) return true;
  if (head.length === 0) return false;
  if (head.includes(0)) return true;
  return Buffer.from(head.toString("utf8"), "utf8").compare(head) !== 0;
}
