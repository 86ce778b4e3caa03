/**
 * The supervisor's file ops (`fs`), dispatched by action. Loaded on first use (see main.mts).
 */
import type net from "node:net";
import { ONE_SHOT, OpError, replyError, replyOnce, stringField, type Conversation } from "./conversation.mjs";
import { Confinement } from "./confinement.mjs";
import { FILE_OPS } from "./file-ops.mjs";
import { receiveFile, sendFile } from "./file-transfer.mjs";

export function handleFileRequest(sock: net.Socket, message: Record<string, unknown>): Conversation {
  const action = stringField(message, "action", 16);
  const op = FILE_OPS[action];
  if (action !== "read" && action !== "write" && !op) throw new OpError("EINVAL", `unknown file action ${action}`);
  const confinement = Confinement.from(message.roots);
  if (action === "write") return receiveFile(sock, message, confinement);
  if (action === "read") {
    confinement.then((ready) => sendFile(sock, message, ready)).catch((error: unknown) => replyError(sock, error));
    return ONE_SHOT;
  }
  confinement
    .then(async (ready) => ({ op: "fs-done", result: await op!(message, ready) }))
    .then((reply) => replyOnce(sock, reply), (error: unknown) => replyError(sock, error));
  return ONE_SHOT;
}
