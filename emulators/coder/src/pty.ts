/**
 * The agent's reconnecting PTY (`GET /api/v2/workspaceagents/{id}/pty?reconnect=&width=&height=&command=`,
 * a WebSocket): the command runs in a real pseudo-terminal inside the workspace (util-linux
 * `script`), its output (stdout and stderr merged, `\r\n` line ends, input echoed) goes out as
 * binary frames, and JSON frames `{"data": "..."}` are typed into it; a frame with both `height`
 * and `width` above 0 resizes the terminal (`{"height", "width"}`, in the same frame as data or
 * alone: workspacesdk's `ReconnectingPTYRequest`). A connection with a known
 * `reconnect` id reattaches and replays the output so far. No exit status is sent: the socket
 * closes when the command ends. A session without connections lives `idleMs`, then is ended.
 */
import type { Router } from "@paperclip-sandbox/emulator-kit";
import { execOnPty, type ExecHandle, type PtyExec, type Sandbox } from "@paperclip-sandbox/sandbox-backend";
import type { WebSocket } from "ws";
import { requireSession } from "./auth.js";
import type { Deployment } from "./deployment.js";
import { coderError } from "./errors.js";

/**
 * The terminal's output buffer in the jail (the backend's largest). Coder's agent holds the command
 * back while a connected client reads; the jail's buffer drops its oldest bytes instead, so a
 * subscriber that lags (a loaded machine, megabytes of base64) must not fall a whole buffer behind.
 */
const PTY_OUTPUT_BYTES = 16 * 1024 * 1024;

export interface PtyDeps {
  deployment: Deployment;
  sessionToken: string;
  /** How long a session without connections is kept for a reconnect (Coder's default: 5 minutes). */
  idleMs: number;
}

interface Session {
  key: string;
  handle: ExecHandle;
  terminal: PtyExec;
  sockets: Set<WebSocket>;
  idleTimer?: NodeJS.Timeout;
  ended: boolean;
}

const isDimension = (value: unknown): value is number => typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= 65_535;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function registerPty(router: Router, deps: PtyDeps): { running(): string[]; closeAll(): void } {
  const sessions = new Map<string, Session>();

  /** The command ended: forget the session; each socket closes once its subscription delivered everything. */
  const finished = (session: Session) => {
    if (session.ended) return;
    session.ended = true;
    if (session.idleTimer) clearTimeout(session.idleTimer);
    sessions.delete(session.key);
    session.handle.close();
  };

  /** Ends a session that is still running (idle past its time, or the emulator closing). */
  const kill = (session: Session) => {
    if (session.ended) return;
    for (const socket of session.sockets) socket.close(1000);
    void session.handle
      .signal("SIGKILL", { group: true })
      .catch(() => undefined)
      .finally(() => finished(session));
  };

  const start = async (sandbox: Sandbox, key: string, command: string, size: { width: number; height: number }, env: Record<string, string>, cwd: string): Promise<Session> => {
    // The agent runs the command through the user's shell, or a login shell without one.
    const inner = command === "" ? "exec /bin/sh -l" : command;
    // `script` (execOnPty) gives the command its terminal, under a shell: the jail makes a command's
    // own process a subreaper, and `script` as one would wait for every orphan the command left (a
    // background job) before ending; Coder's agent ends the terminal when the command ends.
    const terminal = await execOnPty(sandbox, {
      argv: ["/bin/sh", "-c", inner],
      cols: size.width,
      rows: size.height,
      detached: true,
      cwd,
      env: { ...env, TERM: "xterm-256color" },
      tag: "coder-rpty",
      outputLimitBytes: PTY_OUTPUT_BYTES,
    });
    const handle = terminal.handle;
    const session: Session = { key, handle, terminal, sockets: new Set(), ended: false };
    sessions.set(key, session);
    void handle.exited.then(
      () => finished(session),
      () => finished(session),
    );
    return session;
  };

  router.ws("/api/v2/workspaceagents/:id/pty", {
    before(ctx) {
      requireSession(ctx.headers, ctx.query, deps.sessionToken);
      const { agent } = deps.deployment.agent(ctx.params.id!);
      if (agent.status !== "connected") throw coderError(428, `Agent state is ${JSON.stringify(agent.status)}, it must be in the "connected" state.`);
      const reconnect = ctx.query.get("reconnect") ?? "";
      if (!UUID.test(reconnect)) throw coderError(400, "Query param 'reconnect' must be a valid UUID.", { validations: [{ field: "reconnect", detail: "invalid UUID" }] });
      for (const field of ["width", "height"]) {
        const raw = ctx.query.get(field);
        if (raw !== null && !/^\d{1,5}$/.test(raw)) throw coderError(400, `Query param '${field}' must be a valid integer.`);
      }
    },
    async onConnection(socket, ctx) {
      // Input can arrive while the command is being started: keep it until the session exists.
      const early: Buffer[] = [];
      let deliver: (data: Buffer) => void = (data) => void early.push(data);
      let left = false;
      socket.on("message", (data: Buffer) => deliver(data));
      socket.on("close", () => (left = true));

      const { agent, workspace } = deps.deployment.agent(ctx.params.id!);
      const live = deps.deployment.live(workspace);
      if (!live) {
        socket.close(1011, "workspace is not running");
        return;
      }
      const key = `${agent.id}/${ctx.query.get("reconnect")}`;
      let session = sessions.get(key);
      if (!session) {
        try {
          session = await start(
            live.sandbox,
            key,
            ctx.query.get("command") ?? "",
            // uint16 at the agent; the jail's terminals stop at 10000.
            { width: Math.min(Number(ctx.query.get("width") ?? 80), 10_000), height: Math.min(Number(ctx.query.get("height") ?? 24), 10_000) },
            agent.env,
            agent.directory,
          );
        } catch (error) {
          socket.close(1011, `failed to start the command: ${(error as Error).message}`.slice(0, 120));
          return;
        }
      }
      const current = session;
      if (current.idleTimer) clearTimeout(current.idleTimer);
      current.sockets.add(socket);
      // Replays what the terminal printed so far, then follows it live.
      const subscription = current.handle.subscribe(
        { stdout: 0 },
        {
          onData: (_stream, data) => {
            if (socket.readyState === socket.OPEN) socket.send(data, { binary: true });
          },
        },
      );
      deliver = (data: Buffer) => {
        let request: { data?: unknown; height?: unknown; width?: unknown };
        try {
          request = JSON.parse(data.toString("utf8")) as { data?: unknown; height?: unknown; width?: unknown };
        } catch {
          return; // Coder's agent drops what it cannot decode
        }
        if (typeof request.data === "string" && request.data.length > 0) void current.handle.write(Buffer.from(request.data, "utf8")).catch(() => undefined);
        // The agent resizes only when both are given and above 0 (uint16 in its JSON).
        const { height, width } = request;
        if (isDimension(height) && isDimension(width) && height > 0 && width > 0) void current.terminal.resize(width, height).catch(() => undefined);
      };
      for (const data of early.splice(0)) deliver(data);
      const leave = () => {
        subscription.close();
        current.sockets.delete(socket);
        if (current.sockets.size === 0 && !current.ended) {
          current.idleTimer = setTimeout(() => kill(current), deps.idleMs);
          current.idleTimer.unref();
        }
      };
      if (left) leave();
      else socket.on("close", leave);
      void subscription.done.then(
        () => {
          if (socket.readyState === socket.OPEN) socket.close(1000);
        },
        () => undefined,
      );
    },
  });

  return {
    running: () => [...sessions.keys()].map((key) => `pty session ${key}`),
    closeAll: () => {
      for (const session of [...sessions.values()]) kill(session);
    },
  };
}
