/**
 * One host-side connection to a sandbox's supervisor, for the ops beyond the runner (exec
 * handles, output reads and subscriptions, file ops). Whatever the jail sends, a malformed frame
 * or message only ends this connection with an error for its caller: it never throws into the
 * worker's event loop.
 */
import net from "node:net";
import { FRAME_CONTROL, FRAME_STDERR, FRAME_STDIN, FRAME_STDOUT, createFrameDecoder, encodeControl, encodeFrame, parseControl, type FrameLimits } from "./protocol.js";

export interface SupervisorChannel {
  socketPath: string;
  /**
   * Subscribes to "the jail is gone" (e.g. bwrap exited); returns an unsubscribe. A connection made
   * before the supervisor accepts waits in the socket backlog; this ends that wait.
   */
  watchJail?: (onGone: (error: Error) => void) => () => void;
  /**
   * Told of every reply that breaks the protocol (a malformed, oversized or unexpected frame or
   * message): the supervisor can no longer be trusted, so the sandbox ends its jail. The call that
   * got it fails with the same error either way.
   */
  onViolation?: (error: SupervisorProtocolError) => void;
}

export class SupervisorTransportError extends Error {
  override name = "SupervisorTransportError";
}

/** The supervisor sent something the protocol does not allow. */
export class SupervisorProtocolError extends SupervisorTransportError {
  override name = "SupervisorProtocolError";
}

/** A violation found after the connection is done (e.g. a reply of the wrong shape): reported to the channel. */
export function reportViolation(channel: SupervisorChannel, what: string): SupervisorProtocolError {
  const error = new SupervisorProtocolError(`bad reply from the supervisor: ${what.slice(0, 200)}`);
  channel.onViolation?.(error);
  return error;
}

/** What the supervisor may send back: control and output frames; control frames of one reply are small. */
const REPLY_LIMITS: FrameLimits = { maxControlBytes: 1024 * 1024, types: new Set([FRAME_CONTROL, FRAME_STDOUT, FRAME_STDERR]) };
/** Replies that may be large: directory listings and process tables. */
export const LARGE_REPLY_LIMITS: FrameLimits = { ...REPLY_LIMITS, maxControlBytes: 16 * 1024 * 1024 };

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
  /** The last sendData call's end (never rejects): the next one starts after it. */
  private sending: Promise<void> = Promise.resolve();

  constructor(
    private readonly channel: SupervisorChannel,
    handlers: ConnectionHandlers,
    limits: FrameLimits = REPLY_LIMITS,
  ) {
    this.sock = net.connect(channel.socketPath);
    this.unwatch = channel.watchJail?.((error) => this.fail(error)) ?? (() => undefined);
    const decode = createFrameDecoder((type, payload) => {
      // Failed (e.g. a reply over its bound): the rest of what arrived with it is not delivered.
      if (this.failure) return;
      if (type === FRAME_CONTROL) handlers.onControl(parseControl(payload));
      else handlers.onData?.(type, payload);
    }, limits);
    this.sock.on("data", (chunk: Buffer) => {
      if (this.failure) return;
      try {
        decode(chunk);
      } catch (error) {
        this.violate((error as Error).message);
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

  /**
   * Sends bytes as STDIN frames, waiting for the socket to drain when it asks to. Calls go one
   * after another: writers that do not wait for each other (terminal input) keep their order, and
   * one 'drain' wait is pending at a time instead of a listener pair per writer.
   */
  sendData(data: Buffer): Promise<void> {
    const sent = this.sending.then(() => this.sendFrames(data));
    this.sending = sent.catch(() => undefined);
    return sent;
  }

  /** Sends `message` once every sendData call made before it went out (stdin-end after the last bytes). */
  sendAfterData(message: Record<string, unknown>): Promise<void> {
    const sent = this.sending.then(() => {
      this.send(message);
    });
    this.sending = sent.catch(() => undefined);
    return sent;
  }

  private async sendFrames(data: Buffer): Promise<void> {
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

  /** Ends the connection for a reply the protocol does not allow, and tells the channel. */
  violate(what: string): SupervisorProtocolError {
    if (this.failure instanceof SupervisorProtocolError) return this.failure;
    const error = reportViolation(this.channel, what);
    this.failure = error;
    this.sock.destroy();
    return error;
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

/** An `error {code, message}` reply as SupervisorReplyError (the code errno-like, both bounded). */
export function replyError(reply: ControlMessage): SupervisorReplyError {
  const code = typeof reply.code === "string" && /^[A-Z0-9_]{1,32}$/.test(reply.code) ? reply.code : "EFAIL";
  return new SupervisorReplyError(code, typeof reply.message === "string" ? reply.message.slice(0, 2_000) : "supervisor error");
}

/**
 * One control request, one control reply whose op is one of `expected` (an `error` reply rejects
 * with SupervisorReplyError; any other op, or data frames, break the protocol).
 */
export function request(channel: SupervisorChannel, message: Record<string, unknown>, expected: readonly string[], timeoutMs = 30_000, limits: FrameLimits = REPLY_LIMITS): Promise<ControlMessage> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const connection = new Connection(
      channel,
      {
        onControl(reply) {
          if (answered) {
            connection.violate(`a second reply to ${String(message.op)}`);
            return;
          }
          answered = true;
          clearTimeout(timer);
          if (reply.op === "error") reject(replyError(reply));
          else if (expected.includes(reply.op)) resolve(reply);
          else reject(connection.violate(`unexpected reply ${JSON.stringify(reply.op.slice(0, 32))} to ${String(message.op)}`));
          connection.end();
        },
        onData() {
          connection.violate(`output frames in reply to ${String(message.op)}`);
        },
        onEnd(error) {
          clearTimeout(timer);
          if (!answered) reject(error ?? new SupervisorTransportError(`supervisor closed the connection without answering ${String(message.op)}`));
        },
      },
      limits,
    );
    const timer = setTimeout(() => {
      connection.fail(new SupervisorTransportError(`supervisor did not answer ${String(message.op)} within ${timeoutMs} ms`));
    }, timeoutMs);
    connection.send(message);
  });
}
