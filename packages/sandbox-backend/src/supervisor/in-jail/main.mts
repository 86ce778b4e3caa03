/**
 * The in-jail supervisor: plain Node with no dependencies beyond Node's built-ins, run as the
 * sandbox user inside the sandbox's long-lived bubblewrap jail, from read-only binds of the compiled
 * files (`.mjs`, so Node loads them as ESM without a package.json). It:
 * - accepts control connections on an already-listening Unix socket inherited as fd 3 (the worker
 *   created it outside the jail, so the socket is never visible inside, sandboxed code cannot
 *   replace it, and the worker may connect before this process has even started: the kernel
 *   queues the connection in the backlog);
 * - runs runner commands (`start`): the kit's ScriptRunner, output streamed with backpressure, the
 *   command ended when its connection is lost (runner-commands.mts);
 * - runs exec commands (`exec`) with bounded, offset-addressable output kept here, re-attachable by
 *   pid from any connection, optionally detached from the connection that started them
 *   (exec-runs.mts, exec-conversations.mts, output-readers.mts);
 * - performs file ops as the sandbox user, confined to caller-given roots (file-*.mts);
 * - exposes the host-side egress proxy on the jail's loopback (egress-forwarder.mts).
 * Expiry is not enforced here: the jail's host-side keeper (outside the jail, unreachable from it)
 * ends the whole jail at the deadline, which can move while the jail runs.
 *
 * Client ops (the first control message of a connection says what the connection is for):
 *   start {id, script|argv, cwd?, env?, timeoutMs?, killGraceMs?}   then STDIN frames, stdin-end
 *   exec {id?, script|argv, cwd?, env?, timeoutMs?, killGraceMs?, stdin?, detached?, tag?, outputLimitBytes?}
 *                                                                   then STDIN frames, stdin-end
 *   attach {pid}      then STDIN frames, stdin-end
 *   read {pid, stream, offset?, maxBytes?}     subscribe {pid, from: {stdout?, stderr?}}
 *   signal {pid, signal, group?}   processes {}   reap {pid}
 *   fs {action: read|write|stat|list|mkdir|remove|move, path|from+to, roots?, ...}   (write: then STDIN frames, stdin-end)
 *   kill {id, graceMs?} (a runner command, on any connection)   kill-all {graceMs?}   ping
 * Supervisor replies: started {id, pid}, exit {...}, attached {process}, read-done {...},
 *   subscribed / gap / eof / exit, signalled, processes {processes}, reaped, fs-done {result},
 *   pong {pid, running}, killed {ids}, error {code, message}.
 */
import net from "node:net";
import { FRAME_CONTROL, createFrameDecoder, parseControl, writeControl } from "./frames.mjs";
import { ONE_SHOT, OpError, intField, replyError, replyOnce, stringField, type Conversation } from "./conversation.mjs";
import { readConfig } from "./config.mjs";
import { createRunnerCommands } from "./runner-commands.mjs";
import { createExecTable, describeRun, type ExecRun } from "./exec-runs.mjs";
import { bindRun } from "./exec-conversations.mjs";
import { readOutput, subscribe } from "./output-readers.mjs";
import { Confinement } from "./confinement.mjs";
import { FILE_OPS } from "./file-ops.mjs";
import { receiveFile, sendFile } from "./file-transfer.mjs";
import { startEgressForwarder } from "./egress-forwarder.mjs";
import { graceFrom } from "./process-group.mjs";

/** Frames that arrive while an op is still being set up, kept until its conversation exists. */
const MAX_PENDING_BYTES = 1024 * 1024;

function log(message: string): void {
  process.stderr.write(`[supervisor ${new Date().toISOString()}] ${message}\n`);
}

const config = readConfig(process.argv[2]);
const runner = createRunnerCommands(config);
const execs = createExecTable(config);

function runOf(message: Record<string, unknown>): ExecRun {
  const pid = intField(message, "pid", 1, 2 ** 31 - 1);
  const run = execs.byPid(pid);
  if (!run) throw new OpError("ESRCH", `no command with pid ${pid}`);
  return run;
}

/** Answers a one-shot op whose work is asynchronous. */
function answer(sock: net.Socket, work: Promise<Record<string, unknown>>): Conversation {
  work.then((reply) => replyOnce(sock, reply), (error: unknown) => replyError(sock, error));
  return ONE_SHOT;
}

function fileOp(sock: net.Socket, message: Record<string, unknown>): Conversation {
  const action = stringField(message, "action", 16);
  const confinement = Confinement.from(message.roots);
  if (action === "write") return receiveFile(sock, message, confinement);
  if (action === "read") {
    confinement.then((ready) => sendFile(sock, message, ready)).catch((error: unknown) => replyError(sock, error));
    return ONE_SHOT;
  }
  const op = FILE_OPS[action];
  if (!op) throw new OpError("EINVAL", `unknown file action ${action}`);
  return answer(sock, confinement.then(async (ready) => ({ op: "fs-done", result: await op(message, ready) })));
}

/** Decides what a connection is for from its first control message. */
function dispatch(sock: net.Socket, message: Record<string, unknown> & { op: string }): Conversation | Promise<Conversation> {
  switch (message.op) {
    case "ping":
      replyOnce(sock, { op: "pong", pid: process.pid, running: runner.size + execs.runningCount });
      return ONE_SHOT;
    case "start":
      return runner.start(sock, message);
    case "kill":
      return answer(sock, runner.kill(String(message.id), graceFrom(message.graceMs)).then((found) => ({ op: "killed", ids: found ? [message.id] : [] })));
    case "kill-all": {
      const graceMs = graceFrom(message.graceMs);
      return answer(sock, Promise.all([runner.killAll(graceMs), execs.killAll(graceMs)]).then(([a, b]) => ({ op: "killed", ids: [...a, ...b] })));
    }
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
}

function serve(sock: net.Socket): void {
  let conversation: Conversation | null = null;
  let settingUp = false;
  const pending: Array<[number, Buffer]> = [];
  let pendingBytes = 0;

  const begin = (message: Record<string, unknown> & { op: string }) => {
    let chosen: Conversation | Promise<Conversation>;
    try {
      chosen = dispatch(sock, message);
    } catch (error) {
      replyError(sock, error);
      conversation = ONE_SHOT;
      return;
    }
    if (!(chosen instanceof Promise)) {
      conversation = chosen;
      return;
    }
    settingUp = true;
    chosen.then(
      (ready) => {
        conversation = ready;
        settingUp = false;
        for (const [type, payload] of pending.splice(0)) ready.onFrame(type, payload);
        if (sock.isPaused()) sock.resume();
        if (sock.destroyed) ready.onClose();
      },
      (error: unknown) => {
        settingUp = false;
        conversation = ONE_SHOT;
        pending.length = 0;
        replyError(sock, error);
      },
    );
  };

  const decode = createFrameDecoder((type, payload) => {
    if (conversation) return conversation.onFrame(type, payload);
    if (settingUp) {
      pending.push([type, payload]);
      pendingBytes += payload.length;
      if (pendingBytes > MAX_PENDING_BYTES) sock.pause();
      return;
    }
    // Data before any request has nothing to belong to.
    if (type !== FRAME_CONTROL) return;
    begin(parseControl(payload));
  });
  sock.on("data", (chunk: Buffer) => {
    try {
      decode(chunk);
    } catch (error) {
      writeControl(sock, { op: "error", code: "EPROTO", message: (error as Error).message });
      sock.destroy();
    }
  });
  sock.on("error", () => undefined);
  sock.on("close", () => {
    if (conversation) conversation.onClose();
  });
}

// A bug in one op must not end the jail (this process's exit would end every process in it).
process.on("uncaughtException", (error) => log(`uncaught: ${error.stack ?? error.message}`));
process.on("unhandledRejection", (error) => log(`unhandled rejection: ${String((error as Error)?.stack ?? error)}`));

if (config.egress) startEgressForwarder(config.egress, log);
const server = net.createServer(serve);
server.on("error", (error) => {
  log(`control socket: ${error.message}`);
  process.exit(1);
});
server.listen({ fd: 3 });
log(`ready pid=${process.pid}`);
