/**
 * The 0.7.21 container's terminal (`packages/sandbox-container/src/server.ts`, `handlers/pty-ws-handler.ts`
 * and `pty.ts` at `@cloudflare/sandbox@0.7.21`), what `sandbox.terminal()` / `proxyTerminal()` reach
 * through the Durable Object: `GET /ws/pty?sessionId=&cols=&rows=&shell=` upgraded to a WebSocket.
 * One PTY per session, made on the first connection (creating the session if needed) with the
 * session's environment and directory: `[shell]` (default `bash`, no arguments) on a real
 * pseudo-terminal in the jail, `TERM=xterm-256color`. A connection gets the output so far as one
 * binary frame, then `{"type":"ready"}`, then the output live; binary frames are typed into the
 * terminal, a text frame `{"type":"resize","cols","rows"}` resizes it (other text: an `error`
 * status). 0.7.21 sends no `exit` status and does not close the socket when the shell ends; a frame
 * sent after that fails in the handler, which closes the socket (1011 "Internal error"). Deleting
 * the session (or destroying the container) ends the PTY's process.
 */
import type { WebSocket } from "ws";
import { execOnPty, type PtyExec, type Sandbox as Jail } from "@paperclip-sandbox/sandbox-backend";

/** What the jail keeps of a terminal's output (the real one keeps a 256 KiB ring; a lagging reader must not fall a whole ring behind here). */
const PTY_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Bun.Terminal's limit is the kernel's; the jail's terminals stop at 10000. */
const MAX_DIMENSION = 10_000;

export class ContainerPty {
  closed = false;
  private constructor(readonly terminal: PtyExec) {
    void terminal.handle.exited.then(
      () => (this.closed = true),
      () => (this.closed = true),
    );
  }

  static async start(jail: Jail, options: { shell: string; cols: number; rows: number; cwd: string; env: Record<string, string> }): Promise<ContainerPty> {
    const terminal = await execOnPty(jail, {
      argv: [options.shell],
      cols: Math.min(options.cols, MAX_DIMENSION),
      rows: Math.min(options.rows, MAX_DIMENSION),
      detached: true,
      cwd: options.cwd,
      env: { ...options.env, TERM: "xterm-256color", PROMPT_COMMAND: "clear; unset PROMPT_COMMAND" },
      tag: "cloudflare-pty",
      outputLimitBytes: PTY_OUTPUT_BYTES,
    });
    return new ContainerPty(terminal);
  }

  write(bytes: Buffer): void {
    if (this.closed) throw new Error("PTY is closed");
    void this.terminal.handle.write(bytes).catch(() => undefined);
  }

  resize(cols: number, rows: number): void {
    if (this.closed) throw new Error("PTY is closed");
    void this.terminal.resize(Math.min(cols, MAX_DIMENSION), Math.min(rows, MAX_DIMENSION)).catch(() => undefined);
  }

  /** `Pty.destroy()`: the terminal closed and its process sent SIGTERM (Bun's `process.kill()`). */
  async destroy(): Promise<void> {
    this.closed = true;
    await this.terminal.signal("SIGTERM").catch(() => undefined);
    this.terminal.handle.close();
  }
}

const dimension = (raw: string | null): number | undefined => {
  if (raw === null || raw === "") return undefined;
  const value = Number.parseInt(raw, 10);
  return Number.isFinite(value) && value > 0 ? value : undefined;
};

export interface PtyQuery {
  sessionId: string;
  cols: number;
  rows: number;
  shell: string;
}

/** The server's parse of the upgrade's query (sessionId required; `parseInt` of cols and rows, 80 x 24 without). */
export function ptyQueryOf(query: URLSearchParams): PtyQuery | string {
  const sessionId = query.get("sessionId");
  if (!sessionId) return "sessionId query parameter required";
  return { sessionId, cols: dimension(query.get("cols")) ?? 80, rows: dimension(query.get("rows")) ?? 24, shell: query.get("shell") || "bash" };
}

/** One connection to a session's PTY, as `PtyWebSocketHandler` serves it. */
export function servePtyConnection(socket: WebSocket, pty: ContainerPty): void {
  const status = (message: Record<string, unknown>) => socket.readyState === socket.OPEN && socket.send(JSON.stringify(message));
  // Output so far (one frame), then live: the jail's subscription from offset 0 does both in order.
  const subscription = pty.terminal.handle.subscribe(
    { stdout: 0 },
    {
      onData: (_stream, data) => {
        if (socket.readyState === socket.OPEN) socket.send(data, { binary: true });
      },
    },
  );
  status({ type: "ready" });
  socket.on("message", (data: Buffer, isBinary: boolean) => {
    try {
      if (isBinary) return pty.write(data);
      let control: { type?: unknown; cols?: unknown; rows?: unknown };
      try {
        control = JSON.parse(data.toString("utf8")) as typeof control;
      } catch {
        return void status({ type: "error", message: "Invalid control message" });
      }
      if (control.type !== "resize") return;
      const cols = Number(control.cols);
      const rows = Number(control.rows);
      if (!(cols > 0) || !(rows > 0)) return void status({ type: "error", message: "Invalid dimensions: cols and rows must be positive" });
      pty.resize(Math.floor(cols), Math.floor(rows));
    } catch {
      // The server's message handler: a throw (the PTY is closed) closes the socket.
      socket.close(1011, "Internal error");
    }
  });
  socket.on("close", () => subscription.close());
}
