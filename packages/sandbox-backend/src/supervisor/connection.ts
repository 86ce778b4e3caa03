/**
 * One host-side connection to a sandbox's supervisor, for the ops beyond the runner (exec
 * handles, output reads and subscriptions, file ops). Whatever the jail sends, a malformed frame
 * or message only ends this connection with an error for its caller: it never throws into the
 * worker's event loop.
 */
import net from "node:net";
import { FRAME_CONTROL, FRAME_STDIN, createFrameDecoder, encodeControl, encodeFrame, parseControl } from "./protocol.js";

export interface SupervisorChannel {
  socketPath: string;
  /**
   * Subscribes to "the jail is gone" (e.g. bwrap exited); returns an unsubscribe. A connection made
   * before the supervisor accepts waits in the socket backlog; this ends that wait.
   */
  watchJail?: (onGone: (error: Error) => void) => () => void;
}

export class SupervisorTransportError extends Error {
  override name = "SupervisorTransportError";
}

/** An `error {code, message}` reply. */
export class SupervisorReplyError extends Error {
  override name = "SupervisorReplyError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export type ControlMessage = Record<string, unknown> & { op: string };

export interface ConnectionHandlers {
  onControl(message: ControlMessage): void;
  onData?(type: number, payload: Buffer): void;
  /** Exactly once, when the connection is gone; `error` is set for a transport or protocol failure. */
  onEnd(error: Error | null): void;
}

const STDIN_CHUNK_BYTES = 256 * 1024;

export class Connection {
  private readonly sock: net.Socket;
  private ended = false;
  private failure: Error | null = null;
  private readonly unwatch: () => void;

  constructor(channel: SupervisorChannel, handlers: ConnectionHandlers) {
    this.sock = net.connect(channel.socketPath);
    this.unwatch = channel.watchJail?.((error) => this.fail(error)) ?? (() => undefined);
    const decode = createFrameDecoder((type, payload) => {
      // Failed (e.g. a reply over its bound): the rest of what arrived with it is not delivered.
      if (this.failure) return;
      if (type === FRAME_CONTROL) handlers.onControl(parseControl(payload));
      else handlers.onData?.(type, payload);
    });
    this.sock.on("data", (chunk: Buffer) => {
      if (this.failure) return;
      try {
        decode(chunk);
      } catch (error) {
        this.fail(new SupervisorTransportError(`bad reply from the supervisor: ${(error as Error).message}`));
      }
    });
    this.sock.on("error", (error) => {
      this.failure ??= new SupervisorTransportError(`supervisor unreachable: ${error.message}`);
    });
    this.sock.on("close", () => {
      if (this.ended) return;
      this.ended = true;
      this.unwatch();
      handlers.onEnd(this.failure);
    });
  }

  send(message: Record<string, unknown>): boolean {
    if (this.sock.destroyed) return false;
    return this.sock.write(encodeControl(message));
  }

  /** Sends bytes as STDIN frames, waiting for the socket to drain when it asks to. */
  async sendData(data: Buffer): Promise<void> {
    for (let offset = 0; offset < data.length; offset += STDIN_CHUNK_BYTES) {
      if (this.sock.destroyed) throw this.failure ?? new SupervisorTransportError("the supervisor connection is closed");
      if (!this.sock.write(encodeFrame(FRAME_STDIN, data.subarray(offset, offset + STDIN_CHUNK_BYTES)))) await this.drained();
    }
  }

  pause(): void {
    this.sock.pause();
  }

  resume(): void {
    this.sock.resume();
  }

  /** Half-closes after what was written; the supervisor answers or ends its side. */
  end(): void {
    this.sock.end();
  }

  close(): void {
    this.sock.destroy();
  }

  fail(error: Error): void {
    this.failure ??= error;
    this.sock.destroy();
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.sock.off("drain", done);
        this.sock.off("close", done);
        resolve();
      };
      this.sock.once("drain", done);
      this.sock.once("close", done);
    });
  }
}

/** One control request, one control reply (an `error` reply rejects with SupervisorReplyError). */
export function request(channel: SupervisorChannel, message: Record<string, unknown>, timeoutMs = 30_000): Promise<ControlMessage> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const connection = new Connection(channel, {
      onControl(reply) {
        if (answered) return;
        answered = true;
        clearTimeout(timer);
        if (reply.op === "error") reject(new SupervisorReplyError(String(reply.code ?? "EFAIL"), String(reply.message ?? "supervisor error")));
        else resolve(reply);
        connection.end();
      },
      onEnd(error) {
        clearTimeout(timer);
        if (!answered) reject(error ?? new SupervisorTransportError(`supervisor closed the connection without answering ${String(message.op)}`));
      },
    });
    const timer = setTimeout(() => {
      connection.fail(new SupervisorTransportError(`supervisor did not answer ${String(message.op)} within ${timeoutMs} ms`));
    }, timeoutMs);
    connection.send(message);
  });
}
