/**
 * Runner commands (`start`): the kit's ScriptRunner contract, unchanged. One command per
 * connection, in its own process group, output streamed straight to the connection with
 * backpressure (bulk tar streams), and the command ended when its connection is lost before it
 * exits (nobody could receive its output or result). Background processes survive the command.
 */
import type net from "node:net";
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { FRAME_CONTROL, FRAME_STDERR, FRAME_STDIN, FRAME_STDOUT, parseControl, writeControl, writeFrame } from "./frames.mjs";
import { graceFrom, killGroup, OUTPUT_GRACE_MS, outputGrace, preferForOom, reportedSignal, shellCommand, throughReaper } from "./process-group.mjs";
import type { Conversation } from "./conversation.mjs";
import type { SupervisorConfig } from "./config.mjs";

/** After a command's exit, how long output a slow reader holds back is waited for at most. */
const HELD_OUTPUT_WAIT_MS = 2_000;

interface RunnerCommand {
  id: string;
  child: ChildProcess;
  pgid: number;
  done: boolean;
  killing: Promise<void> | null;
  exitSignal?: NodeJS.Signals;
  timedOut: boolean;
  aborted: boolean;
}

export interface RunnerCommands {
  /** Starts the command of a `start` message; the connection then carries its stdin. */
  start(sock: net.Socket, message: Record<string, unknown>): Conversation;
  /** Ends one command's group (a `kill` sent on another connection); false when unknown. */
  kill(id: string, graceMs: number): Promise<boolean>;
  /** Ends every running command's group; returns their ids. */
  killAll(graceMs: number): Promise<string[]>;
  readonly size: number;
}

export function createRunnerCommands(config: SupervisorConfig): RunnerCommands {
  const running = new Map<string, RunnerCommand>();

  const start = (sock: net.Socket, message: Record<string, unknown>): Conversation => {
    const id = String(message.id ?? "");
    const env = { ...config.baseEnv, ...((message.env as Record<string, string> | undefined) ?? {}) };
    const cwd = typeof message.cwd === "string" ? message.cwd : config.defaultCwd;
    const command = throughReaper(
      config.reaper,
      Array.isArray(message.argv) ? { file: String(message.argv[0]), args: (message.argv as string[]).slice(1), env } : shellCommand(String(message.script ?? ""), env),
      cwd,
    );
    // detached: a new session and process group per command, so the group can be ended as a unit.
    const child = spawn(command.file, command.args, { cwd, env: command.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    const run: RunnerCommand = { id, child, pgid: child.pid ?? -1, done: false, killing: null, timedOut: false, aborted: false };
    let stdinEnded = false;

    const writeStdin = (chunk: Buffer) => {
      const stdin = run.child.stdin;
      if (!stdin || stdin.destroyed) return;
      // Backpressure: stop reading the socket until the command has taken the bytes.
      if (!stdin.write(chunk)) {
        sock.pause();
        stdin.once("drain", () => sock.resume());
      }
    };
    const conversation: Conversation = {
      onFrame(type, payload) {
        if (type === FRAME_STDIN) writeStdin(payload);
        else if (type === FRAME_CONTROL && parseControl(payload).op === "stdin-end" && !stdinEnded) {
          stdinEnded = true;
          run.child.stdin?.end();
        }
      },
      onClose() {
        // Output no longer has anywhere to go: keep draining it so writers never block or get SIGPIPE.
        run.child.stdout?.resume();
        run.child.stderr?.resume();
        // The worker that asked for this command is gone (crash, restart, abort) before its exit: nobody
        // can receive its output or result, so end it rather than leave an unobserved command (e.g. a
        // second agent) running. Background processes of a command that already exited are left alone.
        if (!run.done && run.child.exitCode === null && run.child.signalCode === null) void killGroup(run, 250);
      },
    };

    if (child.pid === undefined) {
      run.done = true;
      child.once("error", (error) => {
        writeControl(sock, { op: "error", message: `spawn failed: ${error.message}` });
        writeControl(sock, { op: "exit", id, code: 127, signal: null, timedOut: false, aborted: false });
        sock.end();
      });
      return conversation;
    }
    running.set(id, run);
    preferForOom(child.pid, writeFileSync);
    child.stdin.on("error", () => undefined); // EPIPE when the command does not read its stdin
    writeControl(sock, { op: "started", id, pid: child.pid });

    let timer: NodeJS.Timeout | null = null;
    const timeoutMs = typeof message.timeoutMs === "number" ? message.timeoutMs : 0;
    if (timeoutMs > 0) {
      timer = setTimeout(() => {
        run.timedOut = true;
        void killGroup(run, graceFrom(message.killGraceMs));
      }, timeoutMs);
    }

    // While the connection holds the output back (a slow reader), the pipes are paused (`held`);
    // `releasedAt`: when they last flowed again.
    const back = { held: false, releasedAt: 0 };
    // Once the exit is sent the connection is ending: what a background writer writes after it goes
    // nowhere (a frame written after the end would destroy the socket, and its queued exit with it).
    let reported = false;
    const release = () => {
      if (!back.held) return;
      back.held = false;
      back.releasedAt = Date.now();
      child.stdout!.resume();
      child.stderr!.resume();
    };
    const pipeOut = (stream: NodeJS.ReadableStream, type: number) => {
      stream.on("data", (chunk: Buffer) => {
        if (sock.destroyed || reported) return; // keep draining so background writers never hit SIGPIPE
        if (!writeFrame(sock, type, chunk) && !back.held) {
          back.held = true;
          child.stdout!.pause();
          child.stderr!.pause();
          sock.once("drain", release);
        }
      });
    };
    sock.once("close", release);
    pipeOut(child.stdout, FRAME_STDOUT);
    pipeOut(child.stderr, FRAME_STDERR);

    const ended = (stream: NodeJS.ReadableStream) =>
      new Promise<void>((resolve) => {
        stream.once("end", resolve);
        stream.once("close", resolve);
      });
    const streamsEnded = Promise.all([ended(child.stdout), ended(child.stderr)]);

    child.once("exit", (code, signal) => {
      if (timer) clearTimeout(timer);
      void (async () => {
        // A background process started with `&` may keep the pipes open: give the output a moment to
        // finish, then report the exit without waiting for that process (it keeps running). The
        // moment counts only while the output can flow: what a slow reader holds back in the pipes
        // may be the command's own last output, lost once the exit frame ends the connection.
        // Bounded: a background writer that keeps the pipes full (`yes &`) holds them back for ever.
        const exitedAt = Date.now();
        for (;;) {
          const ended = await Promise.race([streamsEnded.then(() => true), outputGrace().then(() => false)]);
          if (ended || sock.destroyed) break;
          if (!back.held && Date.now() - back.releasedAt >= OUTPUT_GRACE_MS) break;
          if (Date.now() - exitedAt >= HELD_OUTPUT_WAIT_MS) break;
        }
        if (run.killing) await run.killing;
        run.done = true;
        running.delete(id);
        reported = true;
        writeControl(sock, { op: "exit", id, code, signal: reportedSignal(run, signal), timedOut: run.timedOut, aborted: run.aborted });
        sock.end();
        // Paused for a slow reader, the pipes must still drain (to nowhere) or the writer blocks.
        child.stdout!.resume();
        child.stderr!.resume();
      })();
    });
    return conversation;
  };

  return {
    start,
    async kill(id, graceMs) {
      const target = running.get(id);
      if (!target) return false;
      target.aborted = true;
      await killGroup(target, graceMs);
      return true;
    },
    async killAll(graceMs) {
      const targets = [...running.values()];
      for (const target of targets) target.aborted = true;
      await Promise.all(targets.map((target) => killGroup(target, graceMs)));
      return targets.map((target) => target.id);
    },
    get size() {
      return running.size;
    },
  };
}
