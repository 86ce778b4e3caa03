/**
 * The in-jail supervisor: a plain Node script with no dependencies beyond Node's built-ins.
 *
 * It runs as the sandbox user inside the lease's long-lived bubblewrap jail, from a read-only bind
 * of this compiled file (at a `.mjs` path, so Node loads it as ESM without a package.json). It:
 * - accepts control connections on an already-listening Unix socket inherited as fd 3 (the worker
 *   created it in the lease directory, so the socket is never visible inside the jail, sandboxed code
 *   cannot replace it, and the worker may connect before this process has even started: the kernel
 *   queues the connection in the backlog);
 * - runs one `sh -c` (or argv) command per connection, in its own process group, streaming stdout
 *   and stderr back and reporting the exit code or signal; background processes survive the command;
 * - ends a command's whole process group on timeout, on `kill`, or when its connection is lost;
 * - exposes the host-side egress proxy on the jail's loopback (TCP -> the bind-mounted Unix socket);
 * - ends every process of the jail at the lease's expiry, even when no worker is left to do it (the
 *   host-side `timeout` parent of bwrap is the backstop should sandboxed code stop this process).
 *
 * Wire format (binary, length-prefixed, so bulk tar streams carry no base64/JSON cost):
 *   frame = type:u8 | length:u32be | payload
 *   CONTROL (1): UTF-8 JSON object, either direction
 *   STDIN (2) client->supervisor; STDOUT (3) / STDERR (4) supervisor->client: raw bytes
 * Client control ops: start {id, script|argv, cwd?, env?, timeoutMs?, killGraceMs?}, stdin-end,
 *   kill {id, graceMs?} (on any connection), kill-all {graceMs?}, ping.
 * Supervisor control ops: started {id, pid}, exit {id, code, signal, timedOut, aborted},
 *   pong {pid, expiresAt, running}, killed {ids}, error {message}.
 * Keep the frame constants in sync with src/supervisor-protocol.ts (the host side).
 */
import net from "node:net";
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";

const CONTROL = 1;
const STDIN = 2;
const STDOUT = 3;
const STDERR = 4;
const HEADER = 5;
const MAX_CONTROL_BYTES = 16 * 1024 * 1024;

interface SupervisorConfig {
  /** Epoch ms at which the jail must end. */
  expiresAt: number;
  /** Environment every command starts from (PATH, HOME, proxy variables, the egress grant...). */
  baseEnv: Record<string, string>;
  defaultCwd: string;
  /** When set, a TCP listener on 127.0.0.1:port forwards to this Unix socket (the egress proxy). */
  egress?: { port: number; socketPath: string };
}

interface Running {
  id: string;
  child: ChildProcess;
  pgid: number;
  done: boolean;
  killing: Promise<void> | null;
  timedOut: boolean;
  aborted: boolean;
}

const config = JSON.parse(process.argv[2] ?? "{}") as SupervisorConfig;
const running = new Map<string, Running>();

function log(message: string): void {
  process.stderr.write(`[supervisor ${new Date().toISOString()}] ${message}\n`);
}

/** Header and payload go out as one writev: no copy of bulk output into a joined buffer. */
function writeFrame(sock: net.Socket, type: number, payload: Buffer): boolean {
  const header = Buffer.allocUnsafe(HEADER);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(payload.length, 1);
  sock.cork();
  sock.write(header);
  const ok = sock.write(payload);
  process.nextTick(() => sock.uncork());
  return ok;
}

function control(sock: net.Socket, message: Record<string, unknown>): boolean {
  if (sock.destroyed || !sock.writable) return false;
  return writeFrame(sock, CONTROL, Buffer.from(JSON.stringify(message)));
}

/** Incremental frame decoder; keeps at most one partial frame buffered. */
function decoder(onFrame: (type: number, payload: Buffer) => void): (chunk: Buffer) => void {
  let buffered: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    while (buffered.length >= HEADER) {
      const type = buffered.readUInt8(0);
      const length = buffered.readUInt32BE(1);
      if (type === CONTROL && length > MAX_CONTROL_BYTES) throw new Error("control frame too large");
      if (buffered.length < HEADER + length) break;
      const payload = buffered.subarray(HEADER, HEADER + length);
      buffered = buffered.subarray(HEADER + length);
      onFrame(type, payload);
    }
  };
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** SIGTERM the whole group, SIGKILL after the grace, and resolve once no member is left. */
function killGroup(run: Running, graceMs: number): Promise<void> {
  if (run.killing) return run.killing;
  run.killing = (async () => {
    signalGroup(run.pgid, "SIGTERM");
    const termDeadline = Date.now() + Math.max(0, graceMs);
    while (groupAlive(run.pgid) && Date.now() < termDeadline) await sleep(10);
    // Members that ignored SIGTERM (or were stopped) are ended for good.
    const killDeadline = Date.now() + 5_000;
    while (groupAlive(run.pgid) && Date.now() < killDeadline) {
      signalGroup(run.pgid, "SIGKILL");
      await sleep(10);
    }
  })();
  return run.killing;
}

function handleConnection(sock: net.Socket): void {
  let run: Running | null = null;
  let stdinEnded = false;
  const pendingStdin: Buffer[] = [];

  const onFrame = (type: number, payload: Buffer) => {
    if (type === STDIN) {
      if (!run) pendingStdin.push(Buffer.from(payload));
      else writeStdin(payload);
      return;
    }
    if (type !== CONTROL) return;
    const message = JSON.parse(payload.toString("utf8")) as Record<string, unknown>;
    switch (message.op) {
      case "ping":
        control(sock, { op: "pong", pid: process.pid, expiresAt: config.expiresAt, running: running.size });
        sock.end();
        return;
      case "kill": {
        const target = running.get(String(message.id));
        const graceMs = typeof message.graceMs === "number" ? message.graceMs : 250;
        if (target) {
          target.aborted = true;
          void killGroup(target, graceMs).then(() => {
            control(sock, { op: "killed", ids: [target.id] });
            sock.end();
          });
        } else {
          control(sock, { op: "killed", ids: [] });
          sock.end();
        }
        return;
      }
      case "kill-all": {
        const graceMs = typeof message.graceMs === "number" ? message.graceMs : 250;
        const targets = [...running.values()];
        for (const target of targets) target.aborted = true;
        void Promise.all(targets.map((target) => killGroup(target, graceMs))).then(() => {
          control(sock, { op: "killed", ids: targets.map((target) => target.id) });
          sock.end();
        });
        return;
      }
      case "stdin-end":
        stdinEnded = true;
        if (run) run.child.stdin?.end();
        return;
      case "start":
        if (run) throw new Error("one command per connection");
        run = start(sock, message);
        for (const chunk of pendingStdin.splice(0)) writeStdin(chunk);
        if (stdinEnded) run.child.stdin?.end();
        return;
      default:
        control(sock, { op: "error", message: `unknown op ${String(message.op)}` });
    }
  };

  const writeStdin = (chunk: Buffer) => {
    const stdin = run?.child.stdin;
    if (!stdin || stdin.destroyed) return;
    // Backpressure: stop reading the socket until the command has taken the bytes.
    if (!stdin.write(chunk)) {
      sock.pause();
      stdin.once("drain", () => sock.resume());
    }
  };

  const decode = decoder(onFrame);
  sock.on("data", (chunk: Buffer) => {
    try {
      decode(chunk);
    } catch (error) {
      control(sock, { op: "error", message: (error as Error).message });
      sock.destroy();
    }
  });
  sock.on("error", () => undefined);
  sock.on("close", () => {
    if (!run) return;
    // Output no longer has anywhere to go: keep draining it so writers never block or get SIGPIPE.
    run.child.stdout?.resume();
    run.child.stderr?.resume();
    // The worker that asked for this command is gone (crash, restart, abort) before its exit: nobody
    // can receive its output or result, so end it rather than leave an unobserved command (e.g. a
    // second agent) running. Background processes of a command that already exited are left alone.
    if (!run.done && run.child.exitCode === null && run.child.signalCode === null) void killGroup(run, 250);
  });
}

function start(sock: net.Socket, message: Record<string, unknown>): Running {
  const id = String(message.id ?? "");
  const env = { ...config.baseEnv, ...((message.env as Record<string, string> | undefined) ?? {}) };
  const cwd = typeof message.cwd === "string" ? message.cwd : config.defaultCwd;
  const argv = Array.isArray(message.argv) ? (message.argv as string[]) : ["/bin/sh", "-c", String(message.script ?? "")];
  const [file, ...args] = argv as [string, ...string[]];
  // detached: a new session and process group per command, so the group can be ended as a unit.
  const child = spawn(file, args, { cwd, env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
  const run: Running = { id, child, pgid: child.pid ?? -1, done: false, killing: null, timedOut: false, aborted: false };
  if (child.pid === undefined) {
    run.done = true;
    child.once("error", (error) => {
      control(sock, { op: "error", message: `spawn failed: ${error.message}` });
      control(sock, { op: "exit", id, code: 127, signal: null, timedOut: false, aborted: false });
      sock.end();
    });
    return run;
  }
  running.set(id, run);
  // Under a memory limit the OOM killer should pick a command, never the supervisor (whose exit
  // ends the whole jail); raising a score needs no privilege and children inherit it.
  try {
    writeFileSync(`/proc/${child.pid}/oom_score_adj`, "500");
  } catch {
    // The command may already have exited.
  }
  child.stdin.on("error", () => undefined); // EPIPE when the command does not read its stdin
  control(sock, { op: "started", id, pid: child.pid });

  let timer: NodeJS.Timeout | null = null;
  const timeoutMs = typeof message.timeoutMs === "number" ? message.timeoutMs : 0;
  if (timeoutMs > 0) {
    timer = setTimeout(() => {
      run.timedOut = true;
      void killGroup(run, typeof message.killGraceMs === "number" ? message.killGraceMs : 250);
    }, timeoutMs);
  }

  const pipeOut = (stream: NodeJS.ReadableStream & { pause(): void; resume(): void }, type: number) => {
    stream.on("data", (chunk: Buffer) => {
      if (sock.destroyed) return; // keep draining so background writers never hit SIGPIPE
      if (!writeFrame(sock, type, chunk)) {
        child.stdout.pause();
        child.stderr.pause();
        sock.once("drain", () => {
          child.stdout.resume();
          child.stderr.resume();
        });
      }
    });
  };
  pipeOut(child.stdout, STDOUT);
  pipeOut(child.stderr, STDERR);

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
      // finish, then report the exit without waiting for that process (it keeps running).
      await Promise.race([streamsEnded, sleep(100)]);
      if (run.killing) await run.killing;
      run.done = true;
      running.delete(id);
      control(sock, { op: "exit", id, code, signal, timedOut: run.timedOut, aborted: run.aborted });
      sock.end();
    })();
  });
  return run;
}

function startEgressForwarder(egress: NonNullable<SupervisorConfig["egress"]>): void {
  const server = net.createServer((inbound) => {
    const outbound = net.connect(egress.socketPath);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    const close = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on("error", close);
    outbound.on("error", close);
  });
  server.on("error", (error) => log(`egress forwarder: ${error.message}`));
  server.listen(egress.port, "127.0.0.1");
}

/** Exit at the lease's expiry; chained because setTimeout cannot wait longer than ~24.8 days. */
function scheduleExpiry(): void {
  const remaining = config.expiresAt - Date.now();
  if (remaining <= 0) {
    log("lease expired: ending the jail");
    // bwrap's init only exits once it has no children left, so end every process of the jail
    // (kill(-1) reaches all of them but init and us), then ourselves.
    try {
      process.kill(-1, "SIGKILL");
    } catch {
      // Nothing else was running.
    }
    process.exit(0);
  }
  setTimeout(scheduleExpiry, Math.min(remaining, 2 ** 31 - 1));
}

scheduleExpiry();
if (config.egress) startEgressForwarder(config.egress);
const server = net.createServer(handleConnection);
server.on("error", (error) => {
  log(`control socket: ${error.message}`);
  process.exit(1);
});
server.listen({ fd: 3 });
log(`ready pid=${process.pid}`);
