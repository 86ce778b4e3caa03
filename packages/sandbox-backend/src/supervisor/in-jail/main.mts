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
 *   exec runs (exec-ops.mts) and file ops (file-requests.mts) are loaded on first use;
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
import { ONE_SHOT, OpError, replyError, replyOnce, type Conversation } from "./conversation.mjs";
import type { SupervisorConfig } from "./config.mjs";
import { createRunnerCommands } from "./runner-commands.mjs";
import { startEgressForwarder } from "./egress-forwarder.mjs";
import { graceFrom } from "./process-group.mjs";
import { watchIdle } from "./idle.mjs";
import type { PidGuard } from "./hardening.mjs";
import type { ExecOps } from "./exec-ops.mjs";

/** Frames that arrive while an op is still being set up, kept until its conversation exists. */
const MAX_PENDING_BYTES = 1024 * 1024;

function log(message: string): void {
  process.stderr.write(`[supervisor ${new Date().toISOString()}] ${message}\n`);
}

/** Serves the control socket (fd 3) once `guard` is in place (see hardening.mts and the entry, supervisor.mts). */
export function startSupervisor(config: SupervisorConfig, guard: Promise<PidGuard | null>): void {
  const runner = createRunnerCommands(config);
  let pidGuard: PidGuard | null = null;
  // Exec runs and file ops load on first use: the cold path (the first runner command of a fresh
  // jail) only pays for the modules it needs, and an exec does not wait for the file modules.
  let execOps: Promise<ExecOps> | null = null;
  let loadedExecOps: ExecOps | null = null;
  const loadExecOps = (): Promise<ExecOps> => (execOps ??= import("./exec-ops.mjs").then((module) => (loadedExecOps = module.createExecOps(config))));
  let fileRequests: Promise<typeof import("./file-requests.mjs")> | null = null;
  const loadFileRequests = () => (fileRequests ??= import("./file-requests.mjs"));

  /** Answers a one-shot op whose work is asynchronous. */
  function answer(sock: net.Socket, work: Promise<Record<string, unknown>>): Conversation {
    work.then(
      (reply) => replyOnce(sock, reply),
      (error: unknown) => replyError(sock, error),
    );
    return ONE_SHOT;
  }

  /** Decides what a connection is for from its first control message. */
  function dispatch(sock: net.Socket, message: Record<string, unknown> & { op: string }): Conversation | Promise<Conversation> {
    switch (message.op) {
      case "ping":
        replyOnce(sock, { op: "pong", pid: process.pid, running: runner.size + (loadedExecOps?.runningCount ?? 0), guard: pidGuard });
        return ONE_SHOT;
      case "start":
        return runner.start(sock, message);
      case "kill":
        return answer(
          sock,
          runner.kill(String(message.id), graceFrom(message.graceMs)).then((found) => ({ op: "killed", ids: found ? [message.id] : [] })),
        );
      case "kill-all": {
        const graceMs = graceFrom(message.graceMs);
        return answer(
          sock,
          Promise.all([runner.killAll(graceMs), loadedExecOps?.killAll(graceMs) ?? []]).then(([a, b]) => ({ op: "killed", ids: [...a, ...b] })),
        );
      }
      case "fs":
        return loadFileRequests().then((module) => module.handleFileRequest(sock, message));
      default:
        if (!EXEC_OPS.has(message.op)) throw new OpError("ENOSYS", `unknown op ${message.op.slice(0, 64)}`);
        return loadExecOps().then((ops) => ops.dispatch(sock, message));
    }
  }

  const EXEC_OPS = new Set(["exec", "attach", "read", "subscribe", "signal", "processes", "reap"]);

  const idle = watchIdle(config.idleExitMs ?? 0, () => runner.size > 0 || (loadedExecOps?.keptCount ?? 0) > 0, log);

  function serve(sock: net.Socket): void {
    idle.enter();
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
      idle.leave();
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
  // Connections wait in the socket's backlog until the pids below the guard are used up: no command
  // may start before that.
  void guard.then((state) => {
    pidGuard = state;
    if (state && !state.complete) log(`pid guard incomplete: threads ${state.threads.join(",")} not all within 1..${state.guardedUpTo}`);
    server.listen({ fd: 3 });
    log(`ready pid=${process.pid}`);
  });
}
