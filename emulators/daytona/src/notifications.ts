import { randomBytes } from "node:crypto";
import { HttpError, type Router } from "@paperclip-sandbox/emulator-kit";
import type { WebSocket } from "ws";
import type { Fleet, FleetEvent } from "./fleet.js";
import type { SandboxRecord } from "./records.js";

export interface NotificationDeps {
  fleet: Fleet;
  apiKey: string;
  organizationId: string;
  dto(record: SandboxRecord): Record<string, unknown>;
  /** Engine.IO heartbeat (real ms); the client drops a connection silent for pingInterval + pingTimeout. */
  pingIntervalMs?: number;
}

/** Engine.IO v4 packet types (one character before the payload). */
const EIO = { OPEN: "0", CLOSE: "1", PING: "2", PONG: "3", MESSAGE: "4" } as const;
/** Socket.IO v5 packet types, inside an Engine.IO message. */
const SIO = { CONNECT: "0", DISCONNECT: "1", EVENT: "2", CONNECT_ERROR: "4" } as const;

/**
 * Daytona's notification gateway: Socket.IO (v5 over Engine.IO v4, WebSocket transport only, as the
 * gateway and the SDK both configure it) at `<apiUrl>/socket.io/`. A client authenticates with
 * `auth.token` (the API key) in its CONNECT packet and joins its organization's room; it then gets
 * `sandbox.created` (the DTO) and `sandbox.state.updated` (`{sandbox, oldState, newState}`) for the
 * organization's sandboxes. A bad token is a CONNECT_ERROR `{message: "Unauthorized"}`, as Nest's
 * UnauthorizedException becomes one.
 */
export function registerNotificationGateway(router: Router, deps: NotificationDeps): { connected(): number } {
  const sockets = new Set<WebSocket>();
  const pingIntervalMs = deps.pingIntervalMs ?? 25_000;
  const pingTimeoutMs = 20_000;

  const broadcast = (event: FleetEvent) => {
    const [name, payload] =
      event.kind === "created" ? ["sandbox.created", deps.dto(event.record)] : ["sandbox.state.updated", { sandbox: deps.dto(event.record), oldState: event.oldState, newState: event.newState }];
    const frame = `${EIO.MESSAGE}${SIO.EVENT}${JSON.stringify([name, payload])}`;
    for (const socket of sockets) if (socket.readyState === socket.OPEN) socket.send(frame);
  };
  deps.fleet.onEvent(broadcast);

  router.ws("/api/socket.io/", {
    // Engine.IO's own refusal body for a handshake it does not take.
    errorEnvelope: ({ message }) => ({ code: 0, message }),
    before(ctx) {
      if (ctx.query.get("EIO") !== "4" || ctx.query.get("transport") !== "websocket") throw new HttpError(400, "Transport unknown");
    },
    onConnection(socket, ctx) {
      ctx.record.note("organizationId", ctx.query.get("organizationId") ?? deps.organizationId);
      const sid = randomBytes(15).toString("base64url");
      socket.send(`${EIO.OPEN}${JSON.stringify({ sid, upgrades: [], pingInterval: pingIntervalMs, pingTimeout: pingTimeoutMs, maxPayload: 1_000_000 })}`);
      let joined = false;
      const ping = setInterval(() => socket.readyState === socket.OPEN && socket.send(EIO.PING), pingIntervalMs);
      ping.unref();
      socket.on("close", () => {
        clearInterval(ping);
        sockets.delete(socket);
      });
      socket.on("message", (data) => {
        const text = data.toString();
        if (text === EIO.PONG) return;
        if (text === EIO.CLOSE) return socket.close(1000);
        if (!text.startsWith(EIO.MESSAGE)) return;
        const packet = text.slice(1);
        if (packet.startsWith(SIO.CONNECT)) {
          const auth = parseJson(packet.slice(1)) as { token?: unknown } | undefined;
          if (auth?.token !== deps.apiKey) {
            socket.send(`${EIO.MESSAGE}${SIO.CONNECT_ERROR}${JSON.stringify({ message: "Unauthorized" })}`);
            return;
          }
          joined = true;
          sockets.add(socket);
          socket.send(`${EIO.MESSAGE}${SIO.CONNECT}${JSON.stringify({ sid: randomBytes(15).toString("base64url") })}`);
        } else if (packet.startsWith(SIO.DISCONNECT) && joined) {
          joined = false;
          sockets.delete(socket);
        }
      });
    },
  });
  return { connected: () => sockets.size };
}

function parseJson(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
