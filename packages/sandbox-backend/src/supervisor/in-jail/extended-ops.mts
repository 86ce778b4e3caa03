/**
 * The supervisor's ops beyond the runner: exec runs, their output, and file ops. Loaded on first
 * use (see main.mts), so a fresh jail's first runner command does not wait for these modules.
 */
import type net from "node:net";
import { ONE_SHOT, OpError, intField, replyError, replyOnce, stringField, type Conversation } from "./conversation.mjs";
import { writeControl } from "./frames.mjs";
import { createExecTable, describeRun, type ExecRun } from "./exec-runs.mjs";
import { bindRun } from "./exec-conversations.mjs";
import { readOutput, subscribe } from "./output-readers.mjs";
import { Confinement } from "./confinement.mjs";
import { FILE_OPS } from "./file-ops.mjs";
import { receiveFile, sendFile } from "./file-transfer.mjs";
import type { SupervisorConfig } from "./config.mjs";

export interface ExtendedOps {
  dispatch(sock: net.Socket, message: Record<string, unknown> & { op: string }): Conversation | Promise<Conversation>;
  killAll(graceMs: number): Promise<string[]>;
  readonly runningCount: number;
}

export function createExtendedOps(config: SupervisorConfig): ExtendedOps {
  const execs = createExecTable(config);

  const runOf = (message: Record<string, unknown>): ExecRun => {
    const pid = intField(message, "pid", 1, 2 ** 31 - 1);
    const run = execs.byPid(pid);
    if (!run) throw new OpError("ESRCH", `no command with pid ${pid}`);
    return run;
  };

  const fileOp = (sock: net.Socket, message: Record<string, unknown>): Conversation => {
    const action = stringField(message, "action", 16);
    const confinement = Confinement.from(message.roots);
    if (action === "write") return receiveFile(sock, message, confinement);
    if (action === "read") {
      confinement.then((ready) => sendFile(sock, message, ready)).catch((error: unknown) => replyError(sock, error));
      return ONE_SHOT;
    }
    const op = FILE_OPS[action];
    if (!op) {
      confinement.catch(() => undefined);
      throw new OpError("EINVAL", `unknown file action ${action}`);
    }
    confinement
      .then(async (ready) => ({ op: "fs-done", result: await op(message, ready) }))
      .then((reply) => replyOnce(sock, reply), (error: unknown) => replyError(sock, error));
    return ONE_SHOT;
  };

  return {
    dispatch(sock, message) {
      switch (message.op) {
        case "exec":
          return execs.start(message).then((run) => {
            writeControl(sock, { op: "started", id: run.id, pid: run.pid });
            return bindRun(sock, run, { owner: true });
          });
        case "attach": {
          const run = runOf(message);
          writeControl(sock, { op: "attached", process: describeRun(run) });
          return bindRun(sock, run, { owner: false });
        }
        case "read":
          readOutput(sock, runOf(message), message);
          return ONE_SHOT;
        case "subscribe":
          return subscribe(sock, runOf(message), message);
        case "signal":
          execs.signal(intField(message, "pid", 1, 2 ** 31 - 1), message.signal, message.group === true);
          replyOnce(sock, { op: "signalled" });
          return ONE_SHOT;
        case "processes":
          replyOnce(sock, { op: "processes", processes: execs.list() });
          return ONE_SHOT;
        case "reap":
          execs.reap(intField(message, "pid", 1, 2 ** 31 - 1));
          replyOnce(sock, { op: "reaped" });
          return ONE_SHOT;
        case "fs":
          return fileOp(sock, message);
        default:
          throw new OpError("ENOSYS", `unknown op ${message.op.slice(0, 64)}`);
      }
    },
    killAll: (graceMs) => execs.killAll(graceMs),
    get runningCount() {
      return execs.runningCount;
    },
  };
}
