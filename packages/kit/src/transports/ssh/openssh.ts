import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, open, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { shellQuote } from "../../exec/quote.js";
import type { PtyTransport, ScriptExit, ScriptIo, ScriptRunner, TransportCapabilities } from "../../transport.js";
import { exitMarkerLine } from "../exit-marker.js";
import { runSpawnedScript } from "../spawn-process.js";
import { classifySshFailure, sshFailure, SshTransportError } from "./errors.js";
import { openSshPty } from "./openssh-pty.js";

/** Where the server is: the host and port to dial and the login user (absent: ssh's default). */
export interface SshDestination {
  host: string;
  port: number;
  user?: string;
}

/**
 * How the server's host key is checked; never disabled. `accept-new` records a first-seen key in
 * the file and refuses a different one later; `pinned` accepts only the keys already in the file.
 */
export interface HostKeyPolicy {
  mode: "accept-new" | "pinned";
  knownHostsFile: string;
}

export interface OpenSshSessionOptions {
  /** Names the server in errors, e.g. `exe.dev VM paperclip-a1b2`. */
  name: string;
  destination: SshDestination;
  /** A private key (written to a 0600 file in the session's private directory) or a key file path. */
  identity?: { privateKey: string } | { file: string };
  hostKeys: HostKeyPolicy;
  /** Parent of the session's private directory (key file, control socket); default the OS temp dir. */
  runtimeDir?: string;
  /** The ssh client (default `ssh` on PATH). */
  sshPath?: string;
  connectTimeoutMs?: number;
  /**
   * Sessions open at once on the connection. OpenSSH's sshd allows 10 per connection (MaxSessions);
   * the default 8 leaves room for group kills, which do not count.
   */
  maxChannels?: number;
  /** The connection closes itself after this long without a session (a worker that died leaks nothing longer). */
  idleSeconds?: number;
  /** Environment of the ssh processes (default: PATH and HOME of this process). */
  env?: Record<string, string>;
}

/** One multiplexed SSH connection (OpenSSH ControlMaster) and the runners that open channels on it. */
export interface OpenSshSession {
  /** Commands: one channel each on the shared connection, at most `maxChannels` at once. */
  readonly runner: ScriptRunner;
  /** Same channels, outside the limit (the runner's own group kills use it too). */
  readonly controlRunner: ScriptRunner;
  /** Pseudo-terminals: `ssh -tt` channels on the same connection (see `openSshPty`); not counted in the limit. */
  readonly pty: PtyTransport;
  /** Opens the connection now (the first command would otherwise). */
  connect(): Promise<void>;
  /** Ends the connection and removes the private directory (key file included). Idempotent. */
  close(): Promise<void>;
  /** Connections opened so far (1 for a healthy lease; +1 per re-established drop). */
  readonly connections: number;
}

/**
 * What the runner does: stdin streams (with EOF), bytes unchanged, output live and apart, an abort
 * ends the remote process group (from a second channel), no vendor-side deadline.
 */
export const OPENSSH_TRANSPORT: TransportCapabilities = Object.freeze({
  stdin: "stream",
  stdinEof: true,
  binarySafe: true,
  liveOutput: true,
  separateStderr: true,
  signals: "group",
  remoteTimeout: false,
});

const UNIX_SOCKET_PATH_MAX = 107;
/** ssh creates the control socket as `<path>.<16 random chars>` first, then renames it. */
const CONTROL_TEMP_SUFFIX = 17;

/**
 * Opens (lazily) one SSH connection per session and runs every command as a channel on it: no TCP
 * or key exchange per command, and one connection where a vendor drops bursts of new ones. The
 * script travels on the channel's stdin behind a fixed bootstrap command, so neither the local
 * argv nor the remote one carries it (or the environment values inside it). Each command prints a
 * per-call exit marker as its last act; a channel that ends without it lost its connection: the
 * run rejects with `SshTransportError` and the next command connects again.
 */
export async function createOpenSshSession(opts: OpenSshSessionOptions): Promise<OpenSshSession> {
  const dir = await mkdtemp(join(opts.runtimeDir ?? tmpdir(), "pcssh-"));
  const controlPath = join(dir, "c");
  if (Buffer.byteLength(controlPath) + CONTROL_TEMP_SUFFIX > UNIX_SOCKET_PATH_MAX) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`${opts.name}: the SSH control socket path ${controlPath} is too long for a unix socket; use a shorter runtime directory`);
  }
  let keyFile: string | undefined;
  if (opts.identity && "privateKey" in opts.identity) {
    keyFile = join(dir, "id");
    const handle = await open(keyFile, "wx", 0o600);
    try {
      await handle.writeFile(opts.identity.privateKey.endsWith("\n") ? opts.identity.privateKey : `${opts.identity.privateKey}\n`);
    } finally {
      await handle.close();
    }
  } else if (opts.identity) keyFile = opts.identity.file;

  const ssh = opts.sshPath ?? "ssh";
  const env = opts.env ?? { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", ...(process.env.HOME ? { HOME: process.env.HOME } : {}) };
  const { host, port, user } = opts.destination;
  const target = [...["-p", String(port)], ...(user ? ["-l", user] : []), "--", host];
  // -F none: no user or system ssh_config changes what this does.
  const base = ["-F", "none", "-o", `ControlPath=${controlPath}`, "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"];
  const masterArgs = [
    ...base,
    "-M",
    "-N",
    "-o",
    `ControlPersist=${opts.idleSeconds ?? 300}`,
    ...(keyFile ? ["-i", keyFile, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none"] : []),
    "-o",
    `UserKnownHostsFile=${opts.hostKeys.knownHostsFile}`,
    "-o",
    "GlobalKnownHostsFile=/dev/null",
    "-o",
    `StrictHostKeyChecking=${opts.hostKeys.mode === "pinned" ? "yes" : "accept-new"}`,
    "-o",
    "HashKnownHosts=no",
    "-o",
    "CheckHostIP=no",
    "-o",
    "UpdateHostKeys=no",
    "-o",
    `ConnectTimeout=${Math.max(1, Math.ceil((opts.connectTimeoutMs ?? 15_000) / 1000))}`,
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
    "-o",
    "ForwardAgent=no",
    "-o",
    "ForwardX11=no",
    "-o",
    "ClearAllForwardings=yes",
    "-o",
    "PermitLocalCommand=no",
    ...target,
  ];
  // A channel client never dials itself: should the master be gone, `ProxyCommand=false` makes the
  // fallback connection OpenSSH would otherwise open fail at once.
  const channelOptions = [...base, "-o", "ControlMaster=no", "-o", "ProxyCommand=exec false"];
  const channelArgs = [...channelOptions, "-T", ...target];

  let state: "down" | "up" | "closed" = "down";
  let connecting: Promise<void> | undefined;
  let connections = 0;

  const startMaster = () =>
    new Promise<void>((resolve, reject) => {
      // With ControlPersist the client forks the master into the background once authenticated and
      // exits 0: its exit is the readiness signal, its stderr the reason for a failure.
      const child = spawn(ssh, masterArgs, { env, stdio: ["ignore", "ignore", "pipe"], detached: true });
      let stderr = "";
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-8192)));
      child.once("error", (error: NodeJS.ErrnoException) =>
        reject(error.code === "ENOENT" ? new SshTransportError("ssh_missing", `${opts.name}: the ssh client (OpenSSH) is not installed on the worker's host`) : error),
      );
      child.once("close", (code) => {
        if (code === 0) resolve();
        else reject(sshFailure(opts.name, stderr || `ssh exited with status ${code}`));
      });
    });

  const ensureMaster = async (): Promise<void> => {
    if (state === "closed") throw new SshTransportError("connection_lost", `${opts.name}: the SSH session was closed`);
    if (state === "up" && (await controlSocketAnswers(controlPath))) return;
    connecting ??= (async () => {
      state = "down";
      await rm(controlPath, { force: true });
      await startMaster();
      connections += 1;
      state = "up";
    })().finally(() => (connecting = undefined));
    return connecting;
  };

  const stopMaster = async () => {
    await new Promise<void>((resolve) => {
      const child = spawn(ssh, [...base, "-O", "exit", ...target], { env, stdio: "ignore" });
      child.once("error", () => resolve());
      child.once("close", () => resolve());
    });
    await rm(controlPath, { force: true });
  };

  const slots = createSlots(opts.maxChannels ?? 8);

  const runChannel = async (script: string, io: ScriptIo): Promise<ScriptExit> => {
    await ensureMaster();
    const payload = Buffer.from(script, "utf8");
    const marker = `PCSSH${randomBytes(9).toString("hex")}`;
    // The fixed remote command: read exactly the script's bytes from the channel, run it in a
    // subshell (an `exit` inside it still reaches the marker), print the marker with its status.
    // (The substitution drops trailing newlines, which a script does not need.)
    const bootstrap = [`__pc_s=$(head -c ${payload.length}) || exit 125`, `(eval "$__pc_s")`, `__pc_r=$?`, exitMarkerLine(marker, "$__pc_r"), `exit "$__pc_r"`].join("; ");
    const stderrTail = tailKeeper(io.stderr);
    try {
      return await runSpawnedScript(
        {
          file: ssh,
          args: [...channelArgs, `exec /bin/sh -c ${shellQuote(bootstrap)}`],
          env,
          exitMarker: marker,
          // An abort ends the remote process group from a second channel (sshd ends nothing when a
          // channel closes), then this client.
          terminate: async (child, graceMs) => {
            await runChannel(groupKillScript(marker, graceMs), {}).catch(() => undefined);
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
          },
          // No exit marker: the channel ended without the script's status, whatever ssh said about it.
          missingExitMarker: () => {
            const said = stderrTail.text();
            const code = classifySshFailure(said);
            return sshFailure(opts.name, said || "the channel closed without an exit status", code === "unknown" ? "connection_lost" : code);
          },
        },
        { ...io, env: undefined, stdin: prepend(payload, io.stdin), stderr: stderrTail.sink },
      );
    } catch (error) {
      if (error instanceof SshTransportError && error.code === "connection_lost") {
        // The connection may be half dead: end it, so the next command opens a fresh one.
        state = "down";
        await stopMaster().catch(() => undefined);
      }
      throw error;
    }
  };

  const session: OpenSshSession = {
    runner: {
      capabilities: OPENSSH_TRANSPORT,
      run: (script, io) => slots.run(() => runChannel(script, io)),
    },
    controlRunner: { capabilities: OPENSSH_TRANSPORT, run: runChannel },
    pty: openSshPty({ name: opts.name, ssh, env, channelArgs: channelOptions, target, connect: ensureMaster, control: { capabilities: OPENSSH_TRANSPORT, run: runChannel } }),
    connect: ensureMaster,
    async close() {
      if (state === "closed") return;
      const wasUp = state === "up" || connecting !== undefined;
      state = "closed";
      await connecting?.catch(() => undefined);
      if (wasUp) await stopMaster().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
    get connections() {
      return connections;
    },
  };
  return session;
}

/**
 * Ends the process group of the channel whose bootstrap carries `marker`, found by its command line
 * (no pid file, so a command pays nothing for it). sshd makes each session's shell a session and
 * group leader, and the bootstrap keeps that process (exec), so the group is the command's whole
 * tree. A group is signalled only when its leader is one of the bootstrap's own processes; anything
 * else found is signalled by pid. SIGTERM, then SIGKILL after the grace.
 */
function groupKillScript(marker: string, graceMs: number): string {
  // A bracket in the pattern keeps grep from matching its own command line.
  const pattern = `${marker.slice(0, -1)}[${marker.slice(-1)}]`;
  const graceTicks = Math.max(1, Math.ceil(graceMs / 50));
  return [
    `__pc_ps=; __pc_i=0`,
    // The command may not have started yet: look for it for up to 5 s.
    `while :; do`,
    `  for __pc_f in $(grep -l '${pattern}' /proc/[0-9]*/cmdline 2>/dev/null); do __pc_p=\${__pc_f#/proc/}; __pc_ps="$__pc_ps \${__pc_p%/cmdline}"; done`,
    `  [ -n "$__pc_ps" ] && break`,
    `  [ "$__pc_i" -ge 50 ] && exit 0`,
    `  sleep 0.1; __pc_i=$((__pc_i + 1))`,
    `done`,
    `__pc_ts=`,
    `for __pc_p in $__pc_ps; do`,
    `  read -r __pc_st < "/proc/$__pc_p/stat" 2>/dev/null || continue`,
    `  set -- $__pc_st; __pc_g=$5`,
    `  case " $__pc_ps " in *" $__pc_g "*) __pc_t="-$__pc_g" ;; *) __pc_t="$__pc_p" ;; esac`,
    `  case " $__pc_ts " in *" $__pc_t "*) ;; *) __pc_ts="$__pc_ts $__pc_t" ;; esac`,
    `done`,
    `for __pc_t in $__pc_ts; do kill -TERM "$__pc_t" 2>/dev/null; done`,
    `__pc_i=0`,
    `while [ "$__pc_i" -lt ${graceTicks} ]; do __pc_a=; for __pc_t in $__pc_ts; do kill -0 "$__pc_t" 2>/dev/null && __pc_a=1; done; [ -z "$__pc_a" ] && exit 0; sleep 0.05; __pc_i=$((__pc_i + 1)); done`,
    `for __pc_t in $__pc_ts; do kill -KILL "$__pc_t" 2>/dev/null; done`,
    `exit 0`,
  ].join("\n");
}

/** The control socket accepts a connection: the master is alive (cheaper than `ssh -O check`). */
function controlSocketAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

function prepend(head: Buffer, stdin: ScriptIo["stdin"]): Buffer | Readable {
  if (stdin === undefined || stdin === null) return head;
  if (typeof stdin === "string") return Buffer.concat([head, Buffer.from(stdin)]);
  if (Buffer.isBuffer(stdin)) return Buffer.concat([head, stdin]);
  return Readable.from(
    (async function* () {
      yield head;
      try {
        for await (const chunk of stdin) yield chunk as Buffer;
      } catch {
        // A stdin source destroyed by its owner (a stopped duplex channel) just ends the input.
      }
    })(),
    { objectMode: false },
  );
}

/** Passes stderr on (with back-pressure) and keeps its last bytes: ssh's own error lines end up there. */
function tailKeeper(sink: ScriptIo["stderr"]) {
  let tail = Buffer.alloc(0);
  const keep = (chunk: Buffer) => {
    tail = Buffer.concat([tail, chunk]);
    if (tail.length > 4096) tail = tail.subarray(tail.length - 4096);
  };
  const writable = sink instanceof Writable ? sink : undefined;
  const wrapped = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      keep(chunk);
      if (typeof sink === "function") {
        sink(chunk);
        callback();
      } else if (writable && !writable.write(chunk)) writable.once("drain", () => callback());
      else callback();
    },
    final(callback) {
      if (!writable) return callback();
      writable.end(() => callback());
    },
  });
  return { sink: wrapped, text: () => tail.toString("utf8") };
}

/** At most `limit` tasks at once, the rest in arrival order. */
function createSlots(limit: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  return {
    async run<T>(task: () => Promise<T>): Promise<T> {
      if (active >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
      else active += 1;
      try {
        return await task();
      } finally {
        const next = waiting.shift();
        if (next) next();
        else active -= 1;
      }
    },
  };
}
