/** What every op handler of the supervisor shares: one connection is one conversation. */
import type net from "node:net";
import { writeControl } from "./frames.mjs";

/** The rest of a connection after its first control message chose what the connection is for. */
export interface Conversation {
  /** Frames after the first control message (stdin bytes, `stdin-end`, ...). */
  onFrame(type: number, payload: Buffer): void;
  /** The client went away (or the supervisor ended the connection). */
  onClose(): void;
}

/** A conversation that takes no further frames (one-shot ops). */
export const ONE_SHOT: Conversation = { onFrame: () => undefined, onClose: () => undefined };

/** An error with an errno-like code the host maps to its own error classes. */
export class OpError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Replies `error {code, message}` and ends the connection. */
export function replyError(sock: net.Socket, error: unknown): void {
  const code = error instanceof OpError ? error.code : ((error as NodeJS.ErrnoException)?.code ?? "EFAIL");
  const message = error instanceof Error ? error.message : String(error);
  writeControl(sock, { op: "error", code, message });
  sock.end();
}

/** Replies one control message and ends the connection. */
export function replyOnce(sock: net.Socket, message: Record<string, unknown>): void {
  writeControl(sock, message);
  sock.end();
}

export function stringField(message: Record<string, unknown>, name: string, maxLength = 4096): string {
  const value = message[name];
  if (typeof value !== "string" || value.length === 0 || value.length > maxLength) {
    throw new OpError("EINVAL", `${name} must be a non-empty string of at most ${maxLength} characters`);
  }
  return value;
}

export function intField(message: Record<string, unknown>, name: string, min: number, max: number): number {
  const value = message[name];
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new OpError("EINVAL", `${name} must be an integer in [${min}, ${max}]`);
  }
  return value;
}
