/**
 * Checks of the values the host takes from supervisor replies. Everything from the jail is
 * untrusted: a value of the wrong shape is a protocol violation (the caller ends the connection
 * and the sandbox ends its jail), never something passed on as it came.
 */
import type { ExecExit } from "../types.js";
import type { ControlMessage } from "./connection.js";

const SIGNAL_NAME = /^SIG[A-Z0-9+-]{1,12}$/;

/** A pid as the jail names it: a positive integer of a pid_t. */
export function validPid(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value > 0 && value <= 2 ** 31 - 1;
}

/** A byte offset or count: a non-negative safe integer. */
export function validOffset(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** The exit of an `exit {code, signal, timedOut}` message; a string saying what is wrong otherwise. */
export function exitOf(message: ControlMessage | Record<string, unknown>): ExecExit | string {
  const { code, signal } = message;
  if (code !== null && code !== undefined && !(typeof code === "number" && Number.isInteger(code) && code >= 0 && code <= 255)) {
    return `exit code ${JSON.stringify(code).slice(0, 32)} is not null or an integer in [0, 255]`;
  }
  if (signal !== null && signal !== undefined && !(typeof signal === "string" && SIGNAL_NAME.test(signal))) {
    return `exit signal ${JSON.stringify(signal).slice(0, 32)} is not a signal name`;
  }
  return { exitCode: typeof code === "number" ? code : null, signal: typeof signal === "string" ? signal : null, timedOut: message.timedOut === true };
}
