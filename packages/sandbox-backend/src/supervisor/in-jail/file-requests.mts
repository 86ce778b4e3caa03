/**
 * The supervisor's file ops (`fs`), dispatched by action. Loaded on first use (see main.mts).
 */
import type net from "node:net";
import { ONE_SHOT, OpError, replyError, replyOnce, stringField, type Conversation } from "./conversation.mjs";
import { Confinement } from "./confinement.mjs";
import { FILE_OPS } from "./file-ops.mjs";
import { receiveFile, sendFile } from "./file-transfer.mjs";

/**
 * A system error as the caller can use it: its code, and the path the caller named instead of the
 * /proc/self/fd/N/<name> form the op used internally.
 */
function callerError(error: unknown, message: Record<string, unknown>): unknown {
  const errno = error as NodeJS.ErrnoException;
  if (error instanceof OpError || typeof errno?.code !== "string" || typeof errno.syscall !== "string") return error;
  const reason = errno.message.replace(/^[A-Z0-9]+: /, "").replace(/, \w+ '.*$/s, "");
  const shown = typeof message.path === "string" ? message.path : `${String(message.from)} -> ${String(message.to)}`;
  return new OpError(errno.code, `${shown.slice(0, 4096)}: ${reason}`);
}

export function handleFileRequest(sock: net.Socket, message: Record<string, unknown>): Conversation {
  const fail = (error: unknown) => replyError(sock, callerError(error, message));
  const action = stringField(message, "action", 16);
  const op = FILE_OPS[action];
  if (action !== "read" && action !== "write" && !op) throw new OpError("EINVAL", `unknown file action ${action}`);
  const confinement = Confinement.from(message.roots);
  if (action === "write") return receiveFile(sock, message, confinement, (error) => callerError(error, message));
  if (action === "read") {
    confinement.then((ready) => sendFile(sock, message, ready)).catch(fail);
    return ONE_SHOT;
  }
  confinement.then(async (ready) => ({ op: "fs-done", result: await op!(message, ready) })).then((reply) => replyOnce(sock, reply), fail);
  return ONE_SHOT;
}
