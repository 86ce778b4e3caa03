import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable, type Readable } from "node:stream";
import { promisify } from "node:util";
import type { FaultInjector } from "../faults/injector.js";
import type { RequestRecorder } from "../recorder/recorder.js";
import { sleep } from "../util/sleep.js";
import { GATE_FRAME, GATE_SCRIPT } from "./gate.js";

const execFileAsync = promisify(execFile);

/** One SSH session (a channel with a command, or a shell request) that reached a host. */
export interface SshSessionRequest {
  /** The host (see `addHost`) whose port the connection came in on. */
  host: string;
  /** The login user sshd authenticated. */
  user: string;
  /** The command the client asked for; null when it asked for a shell. */
  command: string | null;
  /** The channel's stdin; ends at the client's EOF (or when the session is gone). */
  stdin: Readable;
  /** The channel's stdout and stderr, with back-pressure; they swallow writes once the session is gone. */
  stdout: Writable;
  stderr: Writable;
  /** Aborts when the session is over: it ended, or its client is gone (channel closed; a dropped connection within a second). */
  signal: AbortSignal;
  /**
   * The client's pseudo-terminal (its pty-req; only with `permitTty`): run the command on a terminal
   * of this size and relay bytes unchanged (the session's stdin is what is typed, its stdout what
   * the terminal shows). Absent: a session without a PTY.
   */
  pty?: SshSessionPty;
}

/** A session's terminal as the client asked for it (0 x 0 when the client knows no size). */
export interface SshSessionPty {
  term: string;
  cols: number;
  rows: number;
  /** Each window-change request of the client, in order. */
  onResize(listener: (size: { cols: number; rows: number }) => void): void;
}

/** The session's end: an exit status, or the signal that ended it (sshd reports `exit-signal`). */
export interface SshSessionExit {
  exitCode: number | null;
  signal?: string | null;
}

export type SshSessionHandler = (session: SshSessionRequest) => Promise<SshSessionExit>;

export interface SshServerOptions {
  /** Runs every session; its promise's exit is what the client's channel reports. */
  onSession: SshSessionHandler;
  /** Parent of the server's private directory (config, keys, the gate socket); default the OS temp dir. */
  stateParentDir?: string;
  sshdPath?: string;
  perlPath?: string;
  /** Records connections (`ssh CONNECT`, finished when accepted) and sessions (`ssh EXEC`/`SHELL`, finished at exit). */
  recorder?: RequestRecorder;
  /**
   * Faults armed on the emulator: a `latency` fault on route `ssh-session` (or `*`), method `EXEC`
   * or `SHELL`, delays each session's start, as a vendor's distance delays an SSH channel's open.
   */
  faults?: FaultInjector;
  /** sshd's MaxSessions: sessions open at once on one connection (OpenSSH's default 10). */
  maxSessions?: number;
  /** sshd's PermitTTY: sessions may ask for a pseudo-terminal (`SshSessionRequest.pty`). Default false. */
  permitTty?: boolean;
}

/** A listening address with a host key of its own, like one VM's SSH endpoint. */
export interface SshHost {
  readonly name: string;
  readonly port: number;
  /** The host key as a public key line (`ssh-ed25519 AAAA… <name>`). */
  hostPublicKey(): string;
  /** A new host key for every later connection (a re-imaged machine, or a man in the middle). */
  rotateHostKey(): Promise<void>;
  /** Ends every live connection at once, as a network drop would (the client sees it closed). */
  dropConnections(): number;
  /** Connections accepted so far, and those still open. */
  readonly connections: number;
  readonly liveConnections: number;
  /** Stops listening and drops its connections. */
  close(): Promise<void>;
}

export interface SshServer {
  /** The user sessions log in as: sshd runs as this process's user, which is the only one it can serve. */
  readonly loginUser: string;
  /** The public keys (authorized_keys lines) that may log in. */
  setAuthorizedKeys(lines: readonly string[]): Promise<void>;
  addHost(name: string): Promise<SshHost>;
  host(name: string): SshHost | undefined;
  /** Stops every host and the gate; sessions still running are told they are gone. */
  close(): Promise<void>;
  /** The last lines sshd printed (its errors), for diagnosing a failing connection. */
  log(): string[];
}

const HOST_NAME = /^[a-z0-9][a-z0-9.-]{0,62}$/;

/**
 * A real OpenSSH server for emulators, started as this process's user: each host is a loopback
 * port of its own, every connection accepted there is handed to a fresh `sshd -i` (inetd mode)
 * with that host's key, and every session sshd opens runs the gate, which carries the channel to
 * `onSession`. Clients therefore meet real key exchange, host-key checking, public-key auth and
 * channel multiplexing. sshd serves only this process's user; as root it needs
 * `/run/sshd` (its privilege-separation directory), which it gets in a private mount namespace
 * when the host has none.
 */
export async function startSshServer(options: SshServerOptions): Promise<SshServer> {
  const sshd = options.sshdPath ?? "/usr/sbin/sshd";
  const perl = options.perlPath ?? "/usr/bin/perl";
  const dir = await mkdtemp(join(options.stateParentDir ?? tmpdir(), "emussh-"));
  const gatePath = join(dir, "gate.pl");
  const gateSocket = join(dir, "gate.sock");
  const authorizedKeys = join(dir, "authorized_keys");
  const configPath = join(dir, "sshd_config");
  const loginUser = userInfo().username;
  const asRoot = process.getuid?.() === 0;
  // sshd as root chroots its pre-auth child to /run/sshd; a container without the service has none.
  const privateRun = asRoot && !existsSync("/run/sshd");
  const logLines: string[] = [];
  const log = (line: string) => {
    logLines.push(line);
    if (logLines.length > 200) logLines.shift();
  };

  const cleanupOnFailure = async () => rm(dir, { recursive: true, force: true });
  try {
    await writeFile(gatePath, GATE_SCRIPT, { mode: 0o500 });
    await writeFile(authorizedKeys, "", { mode: 0o600 });
    await writeFile(
      configPath,
      [
        `AuthorizedKeysFile ${authorizedKeys}`,
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "UsePAM no",
        `PermitRootLogin ${asRoot ? "prohibit-password" : "no"}`,
        // The state directory may sit under a world-writable /tmp.
        "StrictModes no",
        "PidFile none",
        "LogLevel ERROR",
        `PermitTTY ${options.permitTty ? "yes" : "no"}`,
        "DisableForwarding yes",
        "PermitUserEnvironment no",
        "PrintMotd no",
        "PrintLastLog no",
        "UseDNS no",
        "Compression no",
        `MaxSessions ${options.maxSessions ?? 10}`,
        // A login shell that is bash sources ~/.bashrc when it sees SSH_CLIENT at shell level 1: the
        // emulator's sessions must not depend on the host user's rc files.
        "SetEnv SHLVL=1",
        "",
      ].join("\n"),
      { mode: 0o600 },
    );
  } catch (error) {
    await cleanupOnFailure();
    throw error;
  }

  const sshdCommand = (args: string[]): { file: string; args: string[] } =>
    privateRun
      ? {
          file: "unshare",
          args: ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", 'mount -t tmpfs -o mode=0755,size=1m emulator-sshd /run && mkdir /run/sshd && exec "$@"', "sh", sshd, ...args],
        }
      : { file: sshd, args };

  const hosts = new Map<string, HostState>();
  const sessions = new Set<{ abort: AbortController; socket: Socket }>();

  // The gate's unix socket: one connection per session.
  const gate: Server = createServer((socket) => serveGate(socket));
  await new Promise<void>((resolve, reject) => {
    gate.once("error", reject);
    gate.listen(gateSocket, () => resolve());
  });
  await chmod(gateSocket, 0o600);

  const serveGate = (socket: Socket) => {
    let buffer: Buffer = Buffer.alloc(0);
    let opened: { stdin: PassThrough; abort: AbortController } | undefined;
    let pty: { term: string; cols: number; rows: number; listeners: Array<(size: { cols: number; rows: number }) => void> } | undefined;
    const sizeOf = (text: string) => {
      const [cols, rows] = text.split(" ").map((n) => Number.parseInt(n, 10));
      return { cols: Number.isInteger(cols) ? cols! : 0, rows: Number.isInteger(rows) ? rows! : 0 };
    };
    const entry = { abort: new AbortController(), socket };
    const gone = () => {
      if (entry.abort.signal.aborted) return;
      entry.abort.abort();
      sessions.delete(entry);
      opened?.stdin.end();
    };
    socket.on("error", gone);
    socket.on("close", gone);
    const send = (type: number, data: Buffer | string, done?: () => void) => {
      if (socket.destroyed || entry.abort.signal.aborted) return done?.();
      const payload = typeof data === "string" ? Buffer.from(data) : data;
      const header = Buffer.alloc(5);
      header.writeUInt8(type, 0);
      header.writeUInt32BE(payload.length, 1);
      const ok = socket.write(Buffer.concat([header, payload]));
      if (!done) return;
      if (ok) done();
      else {
        // Back-pressure from the client through sshd and the gate; a session that goes away releases it.
        const release = () => {
          socket.off("drain", release);
          entry.abort.signal.removeEventListener("abort", release);
          done();
        };
        socket.once("drain", release);
        entry.abort.signal.addEventListener("abort", release, { once: true });
      }
    };
    const output = (type: number) => {
      const stream = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          send(type, chunk, () => callback());
        },
      });
      // A write after the session's end (see `flushed`) is dropped, not an uncaught error.
      stream.on("error", () => undefined);
      return stream;
    };

    socket.on("data", (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      while (buffer.length >= 5) {
        const type = buffer.readUInt8(0);
        const length = buffer.readUInt32BE(1);
        if (length > 4 * 1024 * 1024) return socket.destroy();
        if (buffer.length < 5 + length) break;
        const payload = buffer.subarray(5, 5 + length);
        buffer = buffer.subarray(5 + length);
        if (type === GATE_FRAME.PTY && !opened && !pty) {
          const text = payload.toString("utf8");
          const [cols, rows, ...term] = text.split(" ");
          pty = { ...sizeOf(`${cols} ${rows}`), term: term.join(" "), listeners: [] };
        } else if (type === GATE_FRAME.WINCH && pty) {
          const size = sizeOf(payload.toString("utf8"));
          for (const listener of pty.listeners) listener(size);
        } else if (type === GATE_FRAME.OPEN && !opened) {
          opened = { stdin: new PassThrough(), abort: entry.abort };
          sessions.add(entry);
          void open(payload, opened.stdin);
        } else if (type === GATE_FRAME.STDIN && opened) {
          if (!opened.stdin.write(payload)) {
            socket.pause();
            opened.stdin.once("drain", () => socket.resume());
          }
        } else if (type === GATE_FRAME.STDIN_EOF && opened) opened.stdin.end();
        else return socket.destroy();
      }
    });

    const open = async (payload: Buffer, stdin: PassThrough) => {
      const hostEnd = payload.indexOf(0);
      const userEnd = payload.indexOf(0, hostEnd + 1);
      const host = payload.subarray(0, hostEnd).toString("utf8");
      const user = payload.subarray(hostEnd + 1, userEnd).toString("utf8");
      const hasCommand = payload[userEnd + 1] === 0x31;
      const command = hasCommand ? payload.subarray(userEnd + 2).toString("utf8") : null;
      const method = command === null ? "SHELL" : "EXEC";
      const record = options.recorder?.start({ protocol: "ssh", method, route: "ssh-session", path: host, headers: { user } });
      const latency = options.faults?.take("latency", { route: "ssh-session", method });
      if (latency) {
        record?.fault("latency");
        await sleep(latency.ms, entry.abort.signal);
      }
      const stdout = output(GATE_FRAME.STDOUT);
      const stderr = output(GATE_FRAME.STDERR);
      let exit: SshSessionExit;
      let failure: string | undefined;
      try {
        const terminal = pty;
        exit = await options.onSession({
          host,
          user,
          command,
          stdin,
          stdout,
          stderr,
          signal: entry.abort.signal,
          ...(terminal ? { pty: { term: terminal.term, cols: terminal.cols, rows: terminal.rows, onResize: (listener) => void terminal.listeners.push(listener) } } : {}),
        });
      } catch (error) {
        failure = `emulator: ${(error as Error).message}\n`;
        exit = { exitCode: 255 };
      }
      // A handler returns once it has written its output, not once the Writables sent it (a runner
      // resolves at the command's exit with chunks still queued behind back-pressure); the exit
      // frame ends the gate, so everything queued goes first, as sshd sends a channel's data before
      // its exit status.
      await Promise.all([flushed(stdout), flushed(stderr)]);
      if (failure !== undefined) send(GATE_FRAME.STDERR, failure);
      record?.finish(exit.exitCode ?? 255, exit.signal ?? undefined);
      send(GATE_FRAME.EXIT, exit.signal ? `-${exit.signal.replace(/^SIG/, "")}` : String(exit.exitCode ?? 255));
      socket.end();
    };
  };

  // Checks the configuration (and that sshd and its privilege-separation user exist) once.
  const firstKey = join(dir, "check-key");
  try {
    await execFileAsync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "check", "-f", firstKey]);
    const check = sshdCommand(["-t", "-f", configPath, "-h", firstKey]);
    await execFileAsync(check.file, check.args);
  } catch (error) {
    gate.close();
    await cleanupOnFailure();
    const detail = (error as { stderr?: string }).stderr?.trim() || (error as Error).message;
    throw new Error(`the emulator's OpenSSH server cannot start (install openssh-server; ${sshd} -t said: ${detail})`);
  }

  interface HostState extends SshHost {
    children: Set<ChildProcess>;
  }

  const server: SshServer = {
    loginUser,
    async setAuthorizedKeys(lines) {
      await writeFile(
        authorizedKeys,
        lines
          .map((line) => line.trim())
          .filter(Boolean)
          .join("\n") + "\n",
        { mode: 0o600 },
      );
    },
    async addHost(name) {
      if (!HOST_NAME.test(name)) throw new TypeError(`ssh host name: must be lower-case letters, digits, dots and dashes (got ${JSON.stringify(name)})`);
      if (hosts.has(name)) throw new TypeError(`ssh host ${name} exists already`);
      const keyDir = join(dir, "hosts", name);
      await mkdir(keyDir, { recursive: true, mode: 0o700 });
      let generation = 0;
      let keyPath = "";
      let publicKey = "";
      const newKey = async () => {
        generation += 1;
        const next = join(keyDir, `key-${generation}`);
        await execFileAsync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", next]);
        publicKey = (await readFile(`${next}.pub`, "utf8")).trim();
        keyPath = next;
      };
      await newKey();
      const children = new Set<ChildProcess>();
      let accepted = 0;
      const listener = createServer({ pauseOnConnect: true }, (socket) => {
        accepted += 1;
        options.recorder?.start({ protocol: "ssh", method: "CONNECT", route: "ssh-connection", path: name, headers: {} }).finish(200);
        const command = sshdCommand(["-i", "-e", "-f", configPath, "-h", keyPath, "-o", `ForceCommand=${perl} ${gatePath} ${gateSocket} ${name}`]);
        // sshd gets the connection itself as stdin/stdout; this process keeps no copy of it.
        const child = spawn(command.file, command.args, { stdio: [socket, socket, "pipe"], detached: true });
        socket.destroy();
        children.add(child);
        child.stderr?.setEncoding("utf8");
        child.stderr?.on("data", (text: string) =>
          text
            .split("\n")
            .filter(Boolean)
            .forEach((line) => log(`${name}: ${line}`)),
        );
        child.once("error", (error) => log(`${name}: ${error.message}`));
        child.once("close", () => children.delete(child));
      });
      await new Promise<void>((resolve, reject) => {
        listener.once("error", reject);
        listener.listen(0, "127.0.0.1", () => resolve());
      });
      const address = listener.address();
      const port = typeof address === "object" && address ? address.port : 0;
      const state: HostState = {
        name,
        port,
        children,
        hostPublicKey: () => publicKey,
        rotateHostKey: newKey,
        dropConnections() {
          let dropped = 0;
          for (const child of children) {
            if (child.pid === undefined) continue;
            try {
              process.kill(-child.pid, "SIGKILL");
              dropped += 1;
            } catch {
              // already gone
            }
          }
          return dropped;
        },
        get connections() {
          return accepted;
        },
        get liveConnections() {
          return children.size;
        },
        async close() {
          hosts.delete(name);
          await new Promise<void>((resolve) => listener.close(() => resolve()));
          state.dropConnections();
          await waitForExit(children);
        },
      };
      hosts.set(name, state);
      return state;
    },
    host: (name) => hosts.get(name),
    async close() {
      for (const host of [...hosts.values()]) await host.close();
      for (const session of sessions) {
        session.abort.abort();
        session.socket.destroy();
      }
      await new Promise<void>((resolve) => gate.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
    log: () => [...logLines],
  };
  return server;
}

/** Ends `stream` (when its owner did not) and resolves once every write before that went out, or it closed. */
function flushed(stream: Writable): Promise<void> {
  if (stream.writableFinished || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once("finish", resolve);
    stream.once("close", resolve);
    stream.once("error", () => resolve());
    if (!stream.writableEnded) stream.end();
  });
}

async function waitForExit(children: Set<ChildProcess>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (children.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
}
