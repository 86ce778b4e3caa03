/**
 * Connections bound to one exec run: the connection that started it (`exec`) or one that attached
 * to it later by pid (`attach`). Either carries the run's stdin (STDIN frames, `stdin-end`) and
 * receives `exit` once the run has finished. Losing the starting connection of a plain (not
 * detached) run ends the run, as for runner commands; losing any other connection changes nothing.
 */
import type net from "node:net";
import { FRAME_CONTROL, FRAME_STDIN, parseControl, writeControl } from "./frames.mjs";
import { killGroup } from "./process-group.mjs";
import type { Conversation } from "./conversation.mjs";
import type { ExecRun } from "./exec-runs.mjs";

export function exitMessage(run: ExecRun): Record<string, unknown> {
  return { op: "exit", pid: run.pid, code: run.exit?.code ?? null, signal: run.exit?.signal ?? null, timedOut: run.exit?.timedOut ?? false };
}

export function bindRun(sock: net.Socket, run: ExecRun, options: { owner: boolean }): Conversation {
  let exitSent = false;
  const onChange = () => {
    if (!run.exit || exitSent) return;
    exitSent = true;
    run.listeners.delete(onChange);
    writeControl(sock, exitMessage(run));
    sock.end();
  };
  run.listeners.add(onChange);

  const writeStdin = (chunk: Buffer) => {
    const stdin = run.child.stdin;
    if (!run.stdinOpen || !stdin || stdin.destroyed) return;
    // Backpressure: stop reading this connection until the command has taken the bytes.
    if (!stdin.write(chunk)) {
      sock.pause();
      stdin.once("drain", () => sock.resume());
    }
  };

  const conversation: Conversation = {
    onFrame(type, payload) {
      if (type === FRAME_STDIN) writeStdin(payload);
      else if (type === FRAME_CONTROL && parseControl(payload).op === "stdin-end" && run.stdinOpen) {
        run.stdinOpen = false;
        run.child.stdin?.end();
      }
    },
    onClose() {
      run.listeners.delete(onChange);
      if (options.owner && !run.detached && !run.processExited) void killGroup(run, 250);
    },
  };
  // Attached to a run that has already finished: the exit is known at once.
  onChange();
  return conversation;
}
