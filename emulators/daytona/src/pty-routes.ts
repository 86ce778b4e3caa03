import { HttpError, type HttpContext, type Router, type WebSocketContext } from "@paperclip-sandbox/emulator-kit";
import { execOnPty, type PtyExec } from "@paperclip-sandbox/sandbox-backend";
import type { WebSocket } from "ws";
import { daemonErrorEnvelope } from "./errors.js";
import type { Fleet } from "./fleet.js";
import type { SandboxRecord } from "./records.js";
import { checkEnvs } from "./process-routes.js";
import { toolboxTarget, whileActive, WORK_DIR } from "./toolbox.js";

/** The subprotocol token with which a client opts in to the `exited` control message (the SDK always offers it). */
const EXIT_CONTROL = "X-Daytona-Pty-Exit-Control";
/** Envs travel as `X-Daytona-Pty-Envs~<base64url(JSON)>` in Sec-WebSocket-Protocol (create-connect). */
const ENVS_PREFIX = "X-Daytona-Pty-Envs~";
/** The daemon's terminal sizes: "must be less than 1000". */
const MAX_DIMENSION = 999;
/** The daemon's read limit per client message. */
const READ_LIMIT = 64 * 1024;
/** What the jail's supervisor keeps of a terminal's output (the daemon keeps none: it broadcasts). */
const OUTPUT_LIMIT = 1024 * 1024;
/**
 * The daemon's shell, as `common.GetShell()` resolves it: `$SHELL`, else bash, else sh, run as
 * `<shell> -i -l`. The jail's user has no login shell of record, so bash when the image has it.
 */
const SHELL_ARGV = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -i -l; else exec sh -i -l; fi"];

/** `PtySessionInfo` of `@daytona/toolbox-api-client` 0.218.0. */
interface PtyInfo {
  id: string;
  cwd: string;
  envs: Record<string, string>;
  cols: number;
  rows: number;
  createdAt: string;
  active: boolean;
  lazyStart: boolean;
}

interface Client {
  socket: WebSocket;
  exitControl: boolean;
}

interface PtySession {
  info: PtyInfo;
  pty: PtyExec | undefined;
  clients: Set<Client>;
  /** Settles once the program has ended and its clients were told. */
  ended: Promise<void> | undefined;
  killed: boolean;
}

export interface PtyDeps {
  fleet: Fleet;
  authorize(ctx: Pick<HttpContext, "header" | "query">): void;
}

export interface PtyStore {
  /** Terminals whose program still runs, for leftovers. */
  running(): string[];
}

/**
 * The daemon's PTY sessions (`/process/pty…`): each session is `<shell> -i -l` on a real terminal in
 * the jail (sandbox-backend's `execOnPty`), its output broadcast as binary frames to every attached
 * WebSocket (output with no client attached is not kept, as the daemon keeps none), every client's
 * messages typed into the terminal in arrival order. When the program ends, clients that offered
 * `X-Daytona-Pty-Exit-Control` get `{"type":"control","status":"exited","exitCode"…}` after the last
 * output, then every client the close frame (1000 for 0, else 1011) with `{"exitCode","exitReason"}`
 * as its reason. A delete kills the process tree and closes clients with 137 (SIGKILL).
 */
export function registerPtyRoutes(router: Router, deps: PtyDeps): PtyStore {
  const bySandbox = new Map<string, Map<string, PtySession>>();
  const opts = { errorEnvelope: daemonErrorEnvelope };
  const sessionsOf = (record: SandboxRecord) => {
    const key = bootKey(record);
    let sessions = bySandbox.get(key);
    if (!sessions) bySandbox.set(key, (sessions = new Map()));
    return sessions;
  };
  const sessionOf = (record: SandboxRecord, id: string) => {
    const session = bySandbox.get(bootKey(record))?.get(id);
    if (!session) throw new HttpError(404, "PTY session not found", { code: "NOT_FOUND" });
    return session;
  };
  const target = (ctx: HttpContext | WebSocketContext) => {
    deps.authorize(ctx);
    return toolboxTarget(deps.fleet, ctx);
  };

  const create = (record: SandboxRecord, input: { id: string; cwd: string | undefined; envs: Record<string, string>; cols: number; rows: number; lazyStart: boolean }): PtySession => {
    const sessions = sessionsOf(record);
    if (sessions.has(input.id)) throw new HttpError(409, `PTY session with ID '${input.id}' already exists`, { code: "CONFLICT" });
    const envs = { ...input.envs };
    if (!envs.TERM) envs.TERM = "xterm-256color";
    const session: PtySession = {
      info: { id: input.id, cwd: input.cwd ?? WORK_DIR, envs, cols: input.cols, rows: input.rows, createdAt: new Date().toISOString(), active: false, lazyStart: input.lazyStart },
      pty: undefined,
      clients: new Set(),
      ended: undefined,
      killed: false,
    };
    sessions.set(input.id, session);
    return session;
  };

  const start = async (record: SandboxRecord, session: PtySession): Promise<void> => {
    if (session.pty) return;
    const jail = record.jail;
    if (!jail) throw new HttpError(500, "failed to start PTY session", { code: "INTERNAL_SERVER_ERROR" });
    let pty: PtyExec;
    try {
      pty = await execOnPty(jail, {
        argv: SHELL_ARGV,
        cols: session.info.cols,
        rows: session.info.rows,
        cwd: session.info.cwd,
        env: session.info.envs,
        detached: true,
        outputLimitBytes: OUTPUT_LIMIT,
      });
    } catch {
      sessionsOf(record).delete(session.info.id);
      throw new HttpError(500, "failed to start PTY session", { code: "INTERNAL_SERVER_ERROR" });
    }
    session.pty = pty;
    session.info.active = true;
    const subscription = pty.handle.subscribe(
      { stdout: 0 },
      {
        onData: (_stream, data) => {
          for (const client of session.clients) if (client.socket.readyState === client.socket.OPEN) client.socket.send(data, { binary: true });
        },
      },
    );
    session.ended = subscription.done.then(
      (exit) => finish(record, session, exitCodeOf(exit)),
      () => finish(record, session, 1),
    );
  };

  /** The program ended (or was killed): tell and close every client, forget the session. */
  const finish = (record: SandboxRecord, session: PtySession, exitCode: number) => {
    if (!session.info.active) return;
    session.info.active = false;
    const reason = exitCode === 0 ? undefined : exitReasonText(exitCode);
    const closeData = JSON.stringify({ exitCode, ...(reason ? { exitReason: reason } : {}) });
    for (const client of session.clients) {
      if (client.socket.readyState !== client.socket.OPEN) continue;
      if (client.exitControl && !session.killed) client.socket.send(JSON.stringify({ type: "control", status: "exited", exitCode, ...(reason ? { exitReason: reason } : {}) }));
      client.socket.close(exitCode === 0 ? 1000 : 1011, closeData);
    }
    session.clients.clear();
    session.pty?.handle.close();
    const sessions = bySandbox.get(bootKey(record));
    if (sessions?.get(session.info.id) === session) sessions.delete(session.info.id);
  };

  const kill = async (record: SandboxRecord, session: PtySession) => {
    if (!session.info.active || !session.pty) {
      sessionsOf(record).delete(session.info.id);
      return;
    }
    session.killed = true;
    await session.pty.signal("SIGKILL", { group: true }).catch(() => undefined);
    // The daemon answers the clients at once with 137, whatever the exit the reaper sees later.
    finish(record, session, 137);
  };

  /** A client on the session until it goes away (its messages are typed in arrival order). */
  const attach = async (record: SandboxRecord, session: PtySession, socket: WebSocket, ctx: WebSocketContext) => {
    const client: Client = { socket, exitControl: offered(ctx).includes(EXIT_CONTROL) };
    session.clients.add(client);
    socket.send(JSON.stringify({ type: "control", status: "connected" }));
    let writes = Promise.resolve();
    socket.on("message", (data: Buffer, isBinary: boolean) => {
      void isBinary;
      const bytes = Buffer.from(data);
      writes = writes
        .then(() => session.pty?.handle.write(bytes))
        .catch(() => {
          if (socket.readyState === socket.OPEN) socket.close(1011, "PTY session unavailable");
        });
    });
    await whileActive(deps.fleet, record, () => new Promise<void>((resolve) => socket.once("close", () => resolve())));
    session.clients.delete(client);
  };

  router.post(
    "/toolbox/:sandboxId/process/pty",
    async (ctx) => {
      const { record } = target(ctx);
      const body = (await ctx.readJson<{ id?: unknown; cwd?: unknown; envs?: unknown; cols?: unknown; rows?: unknown; lazyStart?: unknown }>()) ?? {};
      if (typeof body.id !== "string" || body.id === "") throw new HttpError(400, "session ID is required", { code: "BAD_REQUEST" });
      const cols = dimension(body.cols, "cols");
      const rows = dimension(body.rows, "rows");
      const session = create(record, {
        id: body.id,
        cwd: typeof body.cwd === "string" && body.cwd !== "" ? body.cwd : undefined,
        envs: checkEnvs(body.envs) ?? {},
        cols,
        rows,
        lazyStart: body.lazyStart === true,
      });
      if (body.lazyStart !== true) await start(record, session);
      ctx.sendJson(201, { sessionId: body.id });
    },
    opts,
  );
  router.get(
    "/toolbox/:sandboxId/process/pty",
    (ctx) => {
      const { record } = target(ctx);
      return { sessions: [...(bySandbox.get(bootKey(record))?.values() ?? [])].map((s) => s.info) };
    },
    opts,
  );
  router.get(
    "/toolbox/:sandboxId/process/pty/:sessionId",
    (ctx) => {
      const { record } = target(ctx);
      return sessionOf(record, ctx.params.sessionId!).info;
    },
    opts,
  );
  router.delete(
    "/toolbox/:sandboxId/process/pty/:sessionId",
    async (ctx) => {
      const { record } = target(ctx);
      await kill(record, sessionOf(record, ctx.params.sessionId!));
      return { message: "PTY session deleted" };
    },
    opts,
  );
  router.post(
    "/toolbox/:sandboxId/process/pty/:sessionId/resize",
    async (ctx) => {
      const { record } = target(ctx);
      const body = (await ctx.readJson<{ cols?: unknown; rows?: unknown }>()) ?? {};
      if (body.cols === undefined || body.rows === undefined) throw new HttpError(400, "cols and rows are required", { code: "BAD_REQUEST" });
      const cols = dimension(body.cols, "cols");
      const rows = dimension(body.rows, "rows");
      const session = bySandbox.get(bootKey(record))?.get(ctx.params.sessionId!);
      if (!session) throw new HttpError(410, "PTY session not found", { code: "GONE" });
      if (!session.info.active || !session.pty) throw new HttpError(410, "PTY session is not active", { code: "GONE" });
      await session.pty.resize(cols, rows);
      session.info.cols = cols;
      session.info.rows = rows;
      return session.info;
    },
    opts,
  );

  // Create and attach in one upgrade (the SDK's createPty): id, cols, rows, cwd in the query, envs in a subprotocol.
  router.ws("/toolbox/:sandboxId/process/pty/create-connect", {
    errorEnvelope: daemonErrorEnvelope,
    protocols: [EXIT_CONTROL],
    maxPayload: READ_LIMIT,
    before(ctx) {
      const { record } = target(ctx);
      const id = ctx.query.get("id");
      if (!id) throw new HttpError(400, "session ID is required (query param 'id')", { code: "BAD_REQUEST" });
      if (bySandbox.get(bootKey(record))?.has(id)) throw new HttpError(409, `PTY session with ID '${id}' already exists`, { code: "CONFLICT" });
      const cols = dimension(queryNumber(ctx.query.get("cols")), "cols");
      const rows = dimension(queryNumber(ctx.query.get("rows")), "rows");
      envsOf(ctx);
      void cols;
      void rows;
    },
    async onConnection(socket, ctx) {
      const { record } = target(ctx);
      const id = ctx.query.get("id")!;
      let session: PtySession;
      try {
        session = create(record, {
          id,
          cwd: ctx.query.get("cwd") || undefined,
          envs: envsOf(ctx),
          cols: dimension(queryNumber(ctx.query.get("cols")), "cols"),
          rows: dimension(queryNumber(ctx.query.get("rows")), "rows"),
          lazyStart: false,
        });
        await start(record, session);
      } catch (error) {
        sendError(socket, `Failed to start PTY session: ${error instanceof Error ? error.message : String(error)}`);
        return;
      }
      await attach(record, session, socket, ctx);
    },
  });
  router.ws("/toolbox/:sandboxId/process/pty/:sessionId/connect", {
    errorEnvelope: daemonErrorEnvelope,
    protocols: [EXIT_CONTROL],
    maxPayload: READ_LIMIT,
    before(ctx) {
      target(ctx);
    },
    async onConnection(socket, ctx) {
      const { record } = target(ctx);
      const session = bySandbox.get(bootKey(record))?.get(ctx.params.sessionId!);
      if (!session) return sendError(socket, "Failed to connect to PTY session: PTY session not found");
      // A lazy session starts with its first client.
      if (!session.pty) {
        try {
          await start(record, session);
        } catch {
          return sendError(socket, "Failed to connect to PTY session: failed to start PTY session");
        }
      }
      if (!session.info.active) return sendError(socket, "Failed to connect to PTY session: PTY session is not active");
      await attach(record, session, socket, ctx);
    },
  });

  return {
    running: () => [...bySandbox.entries()].flatMap(([key, sessions]) => [...sessions.values()].filter((s) => s.info.active).map((s) => `pty session ${key}/${s.info.id}`)),
  };
}

/** A sandbox's PTY sessions belong to one boot of its daemon. */
function bootKey(record: SandboxRecord): string {
  return `${record.id}#${record.boots}`;
}

function offered(ctx: WebSocketContext): string[] {
  const raw = ctx.req.headers["sec-websocket-protocol"];
  return (Array.isArray(raw) ? raw.join(",") : (raw ?? ""))
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
}

/** The envs subprotocol token, decoded as the daemon does (absent: none; malformed: 400). */
function envsOf(ctx: WebSocketContext): Record<string, string> {
  const token = offered(ctx).find((p) => p.startsWith(ENVS_PREFIX));
  if (!token) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token.slice(ENVS_PREFIX.length), "base64url").toString("utf8"));
  } catch (error) {
    throw new HttpError(400, `invalid envs subprotocol: ${error instanceof Error ? error.message : String(error)}`, { code: "BAD_REQUEST" });
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== "string")) {
    throw new HttpError(400, "invalid envs subprotocol: must be a JSON object of strings", { code: "BAD_REQUEST" });
  }
  for (const key of Object.keys(parsed)) {
    if (key === "" || /[=\0\n\r]/.test(key))
      throw new HttpError(400, `invalid envs subprotocol: env var name ${JSON.stringify(key)} must not be empty or contain '=', NUL, or newline`, { code: "BAD_REQUEST" });
  }
  return parsed as Record<string, string>;
}

function queryNumber(value: string | null): number | undefined {
  if (value === null || value === "") return undefined;
  if (!/^\d+$/.test(value) || Number(value) > 65535) return NaN;
  return Number(value);
}

/** cols/rows: absent means 80x24; at most 999 (the daemon's "must be less than 1000"). */
function dimension(value: unknown, name: "cols" | "rows"): number {
  if (value === undefined || value === null) return name === "cols" ? 80 : 24;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 65535) throw new HttpError(400, `${name} must be an integer between 0 and 65535`, { code: "BAD_REQUEST" });
  if (value > MAX_DIMENSION) throw new HttpError(400, `invalid value for ${name} - must be less than 1000`, { code: "BAD_REQUEST" });
  // A terminal of 0 columns or rows cannot be opened by the jail's `script`: the daemon's minimum is 1 in practice.
  return Math.max(1, value);
}

function exitCodeOf(exit: { exitCode: number | null; signal: string | null } | null): number {
  if (!exit) return 1;
  return exit.exitCode ?? 1;
}

/** The daemon's `exitReasonText`. */
function exitReasonText(code: number): string {
  if (code === 130) return "Ctrl+C";
  if (code === 137) return "SIGKILL";
  if (code === 143) return "SIGTERM";
  if (code > 128) return `signal ${code - 128}`;
  return "non-zero exit";
}

/** The daemon's answer on an upgraded socket it cannot serve: an error control message, then close. */
function sendError(socket: WebSocket, message: string): void {
  if (socket.readyState !== socket.OPEN) return;
  socket.send(JSON.stringify({ type: "control", status: "error", error: message }));
  socket.close();
}
