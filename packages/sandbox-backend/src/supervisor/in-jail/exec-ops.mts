/**
 * The supervisor's exec ops: exec runs and their output. Loaded on first use (see main.mts), so a
 * fresh jail's first runner command does not wait for these modules.
 */
import type net from "node:net";
import { ONE_SHOT, OpError, intField, replyOnce, type Conversation } from "./conversation.mjs";
import { writeControl } from "./frames.mjs";
import { createExecTable, describeRun, type ExecRun } from "./exec-runs.mjs";
import { bindRun } from "./exec-conversations.mjs";
import { readOutput, subscribe } from "./output-readers.mjs";
import type { SupervisorConfig } from "./config.mjs";

export interface ExecOps {
  dispatch(sock: net.Socket, message: Record<string, unknown> & { op: string }): Conversation | Promise<Conversation>;
  killAll(graceMs: number): Promise<string[]>;
  readonly runningCount: number;
  /** Runs kept: running, or finished with output not yet reaped. */
  readonly keptCount: number;
}

export function createExecOps(config: SupervisorConfig): ExecOps {
  const execs = createExecTable(config);

  const runOf = (message: Record<string, unknown>): ExecRun => {
    const pid = intField(message, "pid", 1, 2 ** 31 - 1);
    const run = execs.byPid(pid);
    if (!run) throw new OpError("ESRCH", `no command with pid ${pid}`);
    return run;
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
        default:
          throw new OpError("ENOSYS", `unknown op ${message.op.slice(0, 64)}`);
      }
    },
    killAll: (graceMs) => execs.killAll(graceMs),
    get runningCount() {
      return execs.runningCount;
    },
    get keptCount() {
      return execs.list().length;
    },
  };
}
