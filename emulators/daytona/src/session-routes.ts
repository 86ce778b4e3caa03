import { randomUUID } from "node:crypto";
import { HttpError, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import type { ExecHandle, OutputStreamName, Sandbox as Jail } from "@paperclip-sandbox/sandbox-backend";
import { daemonErrorEnvelope } from "./errors.js";
import type { Fleet } from "./fleet.js";
import type { SandboxRecord } from "./records.js";
import { checkEnvs } from "./process-routes.js";
import { toolboxTarget, whileActive, WORK_DIR } from "./toolbox.js";

/** The log stream's 3-byte markers: a run of bytes after `01 01 01` is stdout, after `02 02 02` stderr. */
const MARKERS: Record<OutputStreamName, Buffer> = { stdout: Buffer.from([1, 1, 1]), stderr: Buffer.from([2, 2, 2]) };
/** Each command's output the daemon keeps, per stream. */
const OUTPUT_LIMIT = 16 * 1024 * 1024;

interface SessionCommand {
  id: string;
  command: string;
  handle: ExecHandle;
  exitCode: number | undefined;
}

interface Session {
  sessionId: string;
  commands: Map<string, SessionCommand>;
}

export interface SessionDeps {
  fleet: Fleet;
  authorize(ctx: Pick<HttpContext, "header" | "query">): void;
}

export interface SessionStore {
  /** Running session commands, for leftovers. */
  running(): string[];
}

/**
 * Process sessions (`/process/session...`): each command runs as a detached exec of the jail, its
 * stdout and stderr kept apart in the backend's output rings, streamed over the WebSocket log
 * endpoint with Daytona's markers, or read whole. Shell state (cd, variables) is not kept between a
 * session's commands here.
 */
export function registerSessionRoutes(router: Router, deps: SessionDeps): SessionStore {
  const bySandbox = new Map<string, Map<string, Session>>();
  const opts = { errorEnvelope: daemonErrorEnvelope };
  const sessionsOf = (sandboxId: string) => {
    let sessions = bySandbox.get(sandboxId);
    if (!sessions) bySandbox.set(sandboxId, (sessions = new Map()));
    return sessions;
  };
  const sessionOf = (sandboxId: string, sessionId: string) => {
    const session = bySandbox.get(sandboxId)?.get(sessionId);
    if (!session) throw new HttpError(404, `session ${sessionId} not found`, { code: "NOT_FOUND" });
    return session;
  };
  const commandOf = (session: Session, commandId: string) => {
    const command = session.commands.get(commandId);
    if (!command) throw new HttpError(404, `command ${commandId} not found`, { code: "PROCESS_NOT_FOUND" });
    return command;
  };
  const view = (command: SessionCommand) => ({ id: command.id, command: command.command, ...(command.exitCode === undefined ? {} : { exitCode: command.exitCode }) });
  const target = (ctx: HttpContext) => {
    deps.authorize(ctx);
    return toolboxTarget(deps.fleet, ctx);
  };

  router.post(
    "/toolbox/:sandboxId/process/session",
    async (ctx) => {
      const { record } = target(ctx);
      const body = await ctx.readJson<{ sessionId?: unknown }>();
      const sessionId = body?.sessionId;
      if (typeof sessionId !== "string" || !/^[A-Za-z0-9._-]{1,128}$/.test(sessionId)) throw new HttpError(400, "sessionId: must be 1-128 of [A-Za-z0-9._-]", { code: "INVALID_REQUEST_BODY" });
      const sessions = sessionsOf(bootKey(record));
      if (sessions.has(sessionId)) throw new HttpError(409, `session ${sessionId} already exists`, { code: "CONFLICT" });
      sessions.set(sessionId, { sessionId, commands: new Map() });
      ctx.send(201);
    },
    opts,
  );
  router.get(
    "/toolbox/:sandboxId/process/session",
    (ctx) => {
      const { record } = target(ctx);
      return [...(bySandbox.get(bootKey(record))?.values() ?? [])].map((s) => ({ sessionId: s.sessionId, commands: [...s.commands.values()].map(view) }));
    },
    opts,
  );
  router.get(
    "/toolbox/:sandboxId/process/session/:sessionId",
    (ctx) => {
      const { record } = target(ctx);
      const session = sessionOf(bootKey(record), ctx.params.sessionId!);
      return { sessionId: session.sessionId, commands: [...session.commands.values()].map(view) };
    },
    opts,
  );
  router.delete(
    "/toolbox/:sandboxId/process/session/:sessionId",
    async (ctx) => {
      const { record, jail } = target(ctx);
      const session = sessionOf(bootKey(record), ctx.params.sessionId!);
      bySandbox.get(bootKey(record))?.delete(session.sessionId);
      await endCommands(jail, session);
      ctx.send(204);
    },
    opts,
  );

  router.post(
    "/toolbox/:sandboxId/process/session/:sessionId/exec",
    async (ctx) => {
      const { record, jail } = target(ctx);
      const session = sessionOf(bootKey(record), ctx.params.sessionId!);
      const body = (await ctx.readJson<{ command?: unknown; runAsync?: unknown; async?: unknown; envs?: unknown }>()) ?? {};
      if (typeof body.command !== "string" || body.command === "") throw new HttpError(400, "command: must be a non-empty string", { code: "INVALID_REQUEST_BODY" });
      const envs = checkEnvs(body.envs);
      const handle = await jail.exec({ script: body.command, cwd: WORK_DIR, detached: true, stdin: true, outputLimitBytes: OUTPUT_LIMIT, ...(envs ? { env: envs } : {}) });
      const command: SessionCommand = { id: randomUUID(), command: body.command, handle, exitCode: undefined };
      session.commands.set(command.id, command);
      // The starting connection stays until the command ends; reads and streams re-attach by pid.
      void handle.exited
        .then(
          (exit) => (command.exitCode = exit.exitCode ?? -1),
          () => (command.exitCode = -1),
        )
        .finally(() => handle.close());
      if (body.runAsync === true || body.async === true) return { cmdId: command.id };
      const exit = await whileActive(deps.fleet, record, () => reattach(jail, command).then((h) => h.exited));
      const logs = await readLogs(jail, command);
      return { cmdId: command.id, exitCode: exit.exitCode ?? -1, ...logs };
    },
    opts,
  );
  router.post(
    "/toolbox/:sandboxId/process/session/:sessionId/command/:commandId/input",
    async (ctx) => {
      const { record, jail } = target(ctx);
      const command = commandOf(sessionOf(bootKey(record), ctx.params.sessionId!), ctx.params.commandId!);
      const body = await ctx.readJson<{ data?: unknown }>();
      if (typeof body?.data !== "string") throw new HttpError(400, "data: must be a string", { code: "INVALID_REQUEST_BODY" });
      if (command.exitCode !== undefined) throw new HttpError(410, `command ${command.id} has already completed`, { code: "COMMAND_ALREADY_COMPLETED" });
      const handle = await reattach(jail, command);
      try {
        await handle.write(Buffer.from(body.data, "utf8"));
      } finally {
        handle.close();
      }
      ctx.send(200);
    },
    opts,
  );
  // The sandbox's entrypoint runs as the image's: these sandboxes have none to report.
  router.get(
    "/toolbox/:sandboxId/process/session/entrypoint",
    (ctx) => {
      target(ctx);
      throw new HttpError(404, "session entrypoint not found", { code: "NOT_FOUND" });
    },
    opts,
  );
  router.get(
    "/toolbox/:sandboxId/process/session/entrypoint/logs",
    (ctx) => {
      target(ctx);
      throw new HttpError(404, "session entrypoint not found", { code: "NOT_FOUND" });
    },
    opts,
  );
  router.get(
    "/toolbox/:sandboxId/process/session/:sessionId/command/:commandId",
    (ctx) => {
      const { record } = target(ctx);
      return view(commandOf(sessionOf(bootKey(record), ctx.params.sessionId!), ctx.params.commandId!));
    },
    opts,
  );
  router.get(
    "/toolbox/:sandboxId/process/session/:sessionId/command/:commandId/logs",
    async (ctx) => {
      const { record, jail } = target(ctx);
      return readLogs(jail, commandOf(sessionOf(bootKey(record), ctx.params.sessionId!), ctx.params.commandId!));
    },
    opts,
  );

  router.ws("/toolbox/:sandboxId/process/session/:sessionId/command/:commandId/logs", {
    errorEnvelope: daemonErrorEnvelope,
    before(ctx) {
      deps.authorize(ctx);
      const { record } = toolboxTarget(deps.fleet, ctx);
      commandOf(sessionOf(bootKey(record), ctx.params.sessionId!), ctx.params.commandId!);
    },
    async onConnection(socket, ctx) {
      const { record, jail } = toolboxTarget(deps.fleet, ctx);
      const command = commandOf(sessionOf(bootKey(record), ctx.params.sessionId!), ctx.params.commandId!);
      // `follow=true`: everything from the first byte, then live output until the command ends.
      await whileActive(deps.fleet, record, async () => {
        const handle = await reattach(jail, command);
        const subscription = handle.subscribe({ stdout: 0, stderr: 0 }, { onData: (stream, data) => socket.readyState === socket.OPEN && socket.send(Buffer.concat([MARKERS[stream], data])) });
        socket.on("close", () => subscription.close());
        await subscription.done.catch(() => null);
        handle.close();
      });
      if (socket.readyState === socket.OPEN) socket.close(1000, "");
    },
  });

  return {
    running: () =>
      [...bySandbox.entries()].flatMap(([key, sessions]) =>
        [...sessions.values()].flatMap((session) => [...session.commands.values()].filter((c) => c.exitCode === undefined).map((c) => `session command ${key}/${session.sessionId}/${c.id}`)),
      ),
  };
}

/** A sandbox's sessions belong to one boot of its daemon: a restart starts with none. */
function bootKey(record: SandboxRecord): string {
  return `${record.id}#${record.boots}`;
}

async function reattach(jail: Jail, command: SessionCommand): Promise<ExecHandle> {
  const handle = await jail.attach(command.handle.pid);
  if (!handle) throw new HttpError(410, `command ${command.id} is no longer known`, { code: "SESSION_ENDED" });
  return handle;
}

async function readLogs(jail: Jail, command: SessionCommand): Promise<{ output: string; stdout: string; stderr: string }> {
  const handle = await reattach(jail, command);
  try {
    const read = async (stream: OutputStreamName) => {
      const parts: Buffer[] = [];
      let offset = 0;
      for (;;) {
        const chunk = await handle.read(stream, offset, { maxBytes: OUTPUT_LIMIT });
        parts.push(chunk.data);
        if (chunk.nextOffset === offset || chunk.data.length === 0) break;
        offset = chunk.nextOffset;
      }
      return Buffer.concat(parts).toString("utf8");
    };
    const stdout = await read("stdout");
    const stderr = await read("stderr");
    return { output: stdout + stderr, stdout, stderr };
  } finally {
    handle.close();
  }
}

async function endCommands(jail: Jail, session: Session): Promise<void> {
  for (const command of session.commands.values()) {
    if (command.exitCode !== undefined) continue;
    const handle = await jail.attach(command.handle.pid).catch(() => null);
    await handle?.signal("SIGKILL", { group: true }).catch(() => undefined);
    handle?.close();
  }
}
