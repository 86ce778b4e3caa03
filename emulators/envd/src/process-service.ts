import { ConnectError, HttpError, connectClientStream, connectServerStream, connectUnary, type ConnectCall, type ConnectServerStream, type Router } from "@paperclip-sandbox/emulator-kit";
import { SandboxError, type OutputStreamName } from "@paperclip-sandbox/sandbox-backend";
import { checkUser, envdTarget, resolveSandboxPath, userFromAuthorization } from "./envd-access.js";
import type { EndEvent, ProcessConfig, ProcessEntry, ProcessListener } from "./process-table.js";
import type { EnvdSandbox, SandboxRegistry } from "./sandboxes.js";

interface ProcessSelector {
  pid?: number;
  tag?: string;
}

interface ProcessInput {
  stdin?: unknown;
  pty?: unknown;
}

/** `process.StreamInputRequest`: one of start, data, keepalive (JSON field names). */
interface StreamInputRequest {
  start?: { process?: ProcessSelector };
  data?: { input?: ProcessInput };
  keepalive?: object;
}

interface StartRequest {
  process?: { cmd?: unknown; args?: unknown; envs?: unknown; cwd?: unknown };
  stdin?: unknown;
  pty?: unknown;
  tag?: unknown;
}

type ProcessEvent =
  | { event: { start: { pid: number } } }
  | { event: { data: Partial<Record<OutputStreamName | "pty", string>> } }
  | { event: { end: EndEvent } }
  | { event: { keepalive: Record<string, never> } };

/**
 * A stream counts as congested (the process's reader waits) only this far behind: up to it, output
 * waits in the response buffer, so the jail's bounded output buffer never overflows for a client
 * that is merely slower than the process.
 */
const CONGESTED_BYTES = 32 * 1024 * 1024;

/** Output and stdin travel as protobuf `bytes`: base64 in the JSON codec. */
const b64 = (bytes: Buffer) => bytes.toString("base64");

/**
 * `process.Process` over the Connect protocol's JSON codec: Start and Connect are server streams
 * (start event first, data while the process runs, the end event last, open until it exits), plus
 * SendInput, CloseStdin, SendSignal and List. As in envd, a process outlives the stream that
 * started it (a client that goes away only stops receiving), a stream attached by Connect sees the
 * output from then on, and the Connect-Timeout-Ms deadline kills the process (its pid, as envd's
 * exec.CommandContext does) and ends the stream with deadline_exceeded.
 */
export function processRoutes(router: Router, sandboxes: SandboxRegistry): void {
  connectServerStream<StartRequest, ProcessEvent>(router, "/process.Process/Start", async (request, stream, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    checkUser(userFromAuthorization(call.header("authorization")));
    const pty = request.pty === undefined || request.pty === null ? undefined : ptySizeOf(request.pty, "pty");
    const config = processConfig(request.process);
    const cwd = resolveSandboxPath(config.cwd ?? "~", "process.cwd");
    const tag = request.tag === undefined || request.tag === null ? undefined : stringOf(request.tag, "tag");
    const stdin = request.stdin === undefined || request.stdin === null ? true : request.stdin === true;
    const session = openSession(stream, call, sandbox);
    let entry: ProcessEntry;
    try {
      entry = await sandbox.processes.start({ config, stdin, tag, cwd, env: config.envs, first: session.listener, ...(pty ? { pty } : {}) });
    } catch (error) {
      session.close();
      throw await startError(error, sandbox, cwd, config);
    }
    killAtDeadline(entry, call.deadline);
    await session.run(entry);
  });

  connectServerStream<{ process?: ProcessSelector }, ProcessEvent>(router, "/process.Process/Connect", async (request, stream, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    const entry = selectProcess(sandbox, request.process);
    const session = openSession(stream, call, sandbox);
    entry.listeners.add(session.listener);
    await session.run(entry);
  });

  connectUnary<{ process?: ProcessSelector; input?: ProcessInput }, object>(router, "/process.Process/SendInput", async (request, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    const entry = selectProcess(sandbox, request.process);
    await writeInput(entry, request.input);
    return {};
  });

  // envd's StreamInput: one client stream carries a process's input: a start event naming the
  // process, then data events written in order as they arrive (each as SendInput would), keepalives
  // ignored; the answer comes once the client ends the stream. Stdin stays open (CloseStdin closes it).
  connectClientStream<StreamInputRequest, object>(router, "/process.Process/StreamInput", async (messages, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    let entry: ProcessEntry | undefined;
    for await (const message of messages) {
      if (message.start !== undefined) entry = selectProcess(sandbox, message.start?.process);
      else if (message.data !== undefined) {
        // envd would dereference no process here (its handler panics and the request dies).
        if (!entry) throw new ConnectError("internal", "input before the start event");
        await writeInput(entry, message.data?.input);
      } else if (message.keepalive === undefined) throw new ConnectError("unimplemented", "invalid event type");
    }
    return {};
  });

  connectUnary<{ process?: ProcessSelector }, object>(router, "/process.Process/CloseStdin", async (request, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    const entry = selectProcess(sandbox, request.process);
    if (entry.pty) throw new ConnectError("internal", "cannot close stdin for PTY process — send Ctrl+D (0x04) instead");
    if (entry.stdinEnabled) await entry.handle.closeStdin().catch(() => undefined);
    return {};
  });

  connectUnary<{ process?: ProcessSelector; signal?: unknown }, object>(router, "/process.Process/SendSignal", async (request, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    const entry = selectProcess(sandbox, request.process);
    const signal = signalOf(request.signal);
    // envd signals the process it started: on a terminal that is the program, not our wrapper.
    await (entry.pty ? entry.pty.signal(signal) : entry.handle.signal(signal, { group: false })).catch((error: unknown) => {
      throw new ConnectError("internal", `error sending signal to process ${entry.pid}: ${(error as Error).message}`);
    });
    return {};
  });

  connectUnary<object, object>(router, "/process.Process/List", (_request, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    return {
      processes: sandbox.processes.running().map((entry) => ({
        config: { cmd: entry.config.cmd, args: entry.config.args, envs: entry.config.envs, ...(entry.config.cwd ? { cwd: entry.config.cwd } : {}) },
        pid: entry.pid,
        ...(entry.tag !== undefined ? { tag: entry.tag } : {}),
      })),
    };
  });

  connectUnary<{ process?: ProcessSelector; pty?: unknown }, object>(router, "/process.Process/Update", async (request, call) => {
    const { sandbox } = envdTarget(call.ctx, sandboxes);
    const entry = selectProcess(sandbox, request.process);
    if (request.pty === undefined || request.pty === null) return {};
    const size = ptySizeOf(request.pty, "pty");
    if (!entry.pty) throw new ConnectError("internal", "error resizing tty: tty not assigned to process");
    await entry.pty.resize(size.cols, size.rows).catch((error: unknown) => {
      throw new ConnectError("internal", `error resizing tty: ${(error as Error).message}`);
    });
    return {};
  });
}

interface Session {
  readonly listener: ProcessListener;
  /** Sends the start event, then relays output until the process ends or the stream does (a Connect deadline only ends the stream). */
  run(entry: ProcessEntry): Promise<void>;
  close(): void;
}

/**
 * One Start or Connect stream attached to a process. Output that arrives before the start event went
 * out waits for it; a congested connection holds the process's reader (back-pressure, as envd's
 * channels block); keepalive events go out while the process is silent.
 */
function openSession(stream: ConnectServerStream<ProcessEvent>, call: ConnectCall, sandbox: EnvdSandbox): Session {
  const res = call.ctx.res;
  let started = false;
  let closed = false;
  const early: ProcessEvent[] = [];
  let entry: ProcessEntry | undefined;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));

  const keepaliveSeconds = Number(call.header("keepalive-ping-interval") ?? "");
  const keepaliveMs = Number.isFinite(keepaliveSeconds) && keepaliveSeconds > 0 ? keepaliveSeconds * 1000 : undefined;
  let keepalive: NodeJS.Timeout | undefined;
  const armKeepalive = () => {
    if (keepaliveMs === undefined || closed) return;
    if (keepalive) clearTimeout(keepalive);
    keepalive = setTimeout(() => {
      send({ event: { keepalive: {} } });
      armKeepalive();
    }, keepaliveMs);
    keepalive.unref();
  };

  const send = (event: ProcessEvent) => {
    if (closed) return;
    if (!started) early.push(event);
    else stream.send(event);
  };

  const close = () => {
    if (closed) return;
    closed = true;
    if (keepalive) clearTimeout(keepalive);
    entry?.listeners.delete(listener);
    sandbox.streams.delete(endByLifecycle);
    finish();
  };

  // The sandbox paused or went away under the stream: its connection would break.
  const endByLifecycle = (why: string) => {
    if (closed) return;
    stream.end(new ConnectError("unavailable", why));
    close();
  };
  sandbox.streams.add(endByLifecycle);

  const listener: ProcessListener = {
    data(name, bytes) {
      send({ event: { data: { [name]: b64(bytes) } } });
      armKeepalive();
    },
    end(event) {
      if (closed) return;
      const drop = call.shouldDrop("exit-frame");
      if (!drop) send({ event: { end: event } });
      else if (drop.then === "hang") stream.hang();
      close();
    },
    fail(reason) {
      if (closed) return;
      stream.end(new ConnectError("data_loss", reason));
      close();
    },
    congested: () => !closed && res.writableLength > CONGESTED_BYTES,
    onceDrained(resume) {
      let done = false;
      const once = () => {
        if (done) return;
        done = true;
        res.off("drain", once);
        res.off("close", once);
        finishedOnce.delete(once);
        resume();
      };
      if (closed || res.destroyed) return resume();
      res.once("drain", once);
      res.once("close", once);
      finishedOnce.add(once);
    },
  };
  const finishedOnce = new Set<() => void>();

  // A client that leaves only detaches; the call's end (deadline, client gone) stops relaying.
  call.signal.addEventListener(
    "abort",
    () => {
      close();
      for (const resume of [...finishedOnce]) resume();
    },
    { once: true },
  );

  return {
    listener,
    close,
    async run(attached) {
      entry = attached;
      if (closed) {
        attached.listeners.delete(listener);
        return;
      }
      stream.send({ event: { start: { pid: attached.pid } } });
      started = true;
      for (const event of early.splice(0)) stream.send(event);
      armKeepalive();
      await finished;
    },
  };
}

/**
 * envd runs the process under a context with the Connect deadline: at that moment it is killed
 * (SIGKILL to its pid), whether or not the client is still there (connect-web gives up at the same
 * deadline, often a moment before the server).
 */
function killAtDeadline(entry: ProcessEntry, deadline: number | undefined): void {
  if (deadline === undefined) return;
  const timer = setTimeout(() => void entry.handle.signal("SIGKILL", { group: false }).catch(() => undefined), Math.max(0, deadline - Date.now()));
  timer.unref();
  void entry.ended.then(() => clearTimeout(timer));
}

/** envd's handleInput: `pty` bytes to the process's terminal, `stdin` bytes to its stdin. */
async function writeInput(entry: ProcessEntry, input: ProcessInput | undefined): Promise<void> {
  if (input?.pty !== undefined) {
    // envd's WriteTty: the bytes go to the process's terminal (its line discipline echoes, ^C interrupts).
    if (typeof input.pty !== "string") throw new ConnectError("invalid_argument", "input.pty: required (base64 bytes)");
    if (!entry.pty) throw new ConnectError("internal", "error writing to tty: tty not assigned to process — input should be written to the stdin, not the tty");
    try {
      await entry.handle.write(Buffer.from(input.pty, "base64"));
    } catch (error) {
      throw new ConnectError("internal", `error writing to tty of process '${entry.pid}': ${(error as Error).message}`);
    }
    return;
  }
  const data = input?.stdin;
  if (typeof data !== "string") throw new ConnectError("invalid_argument", "input.stdin: required (base64 bytes)");
  if (!entry.stdinEnabled) throw new ConnectError("failed_precondition", `stdin of process ${entry.pid} is not enabled or closed`);
  try {
    await entry.handle.write(Buffer.from(data, "base64"));
  } catch (error) {
    throw new ConnectError("failed_precondition", `error writing to stdin of process ${entry.pid}: ${(error as Error).message}`);
  }
}

function selectProcess(sandbox: EnvdSandbox, selector: ProcessSelector | undefined): ProcessEntry {
  if (selector?.pid !== undefined) {
    const pid = Number(selector.pid);
    const entry = Number.isInteger(pid) ? sandbox.processes.get(pid) : undefined;
    if (!entry) throw new ConnectError("not_found", `process with pid ${String(selector.pid)} not found`);
    return entry;
  }
  if (typeof selector?.tag === "string") {
    const entry = sandbox.processes.byTag(selector.tag);
    if (!entry) throw new ConnectError("not_found", `process with tag ${selector.tag} not found`);
    return entry;
  }
  throw new ConnectError("invalid_argument", "process: give a pid or a tag");
}

function processConfig(raw: StartRequest["process"]): ProcessConfig {
  if (!raw || typeof raw !== "object") throw new ConnectError("invalid_argument", "process: required");
  const cmd = stringOf(raw.cmd, "process.cmd");
  if (cmd === "") throw new ConnectError("invalid_argument", "process.cmd: must not be empty");
  const args = raw.args === undefined || raw.args === null ? [] : raw.args;
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) throw new ConnectError("invalid_argument", "process.args: must be a list of strings");
  const envs: Record<string, string> = {};
  if (raw.envs !== undefined && raw.envs !== null) {
    if (typeof raw.envs !== "object" || Array.isArray(raw.envs)) throw new ConnectError("invalid_argument", "process.envs: must be a map of strings");
    for (const [key, value] of Object.entries(raw.envs)) {
      if (typeof value !== "string") throw new ConnectError("invalid_argument", `process.envs.${key}: must be a string`);
      envs[key] = value;
    }
  }
  const cwd = raw.cwd === undefined || raw.cwd === null || raw.cwd === "" ? undefined : stringOf(raw.cwd, "process.cwd");
  return { cmd, args: args as string[], envs, ...(cwd !== undefined ? { cwd } : {}) };
}

/** `process.PTY {size: {cols, rows}}` (uint32s; envd casts them to the terminal's uint16 window size). */
function ptySizeOf(value: unknown, field: string): { cols: number; rows: number } {
  const size = typeof value === "object" && value !== null ? (value as { size?: unknown }).size : undefined;
  const { cols, rows } = (typeof size === "object" && size !== null ? size : {}) as { cols?: unknown; rows?: unknown };
  const dimension = (v: unknown, name: string) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 65_535) throw new ConnectError("invalid_argument", `${field}.size.${name}: must be a whole number from 1 to 65535`);
    return v;
  };
  return { cols: dimension(cols, "cols"), rows: dimension(rows, "rows") };
}

function stringOf(value: unknown, field: string): string {
  if (typeof value !== "string") throw new ConnectError("invalid_argument", `${field}: must be a string`);
  return value;
}

function signalOf(value: unknown): "SIGKILL" | "SIGTERM" {
  if (value === "SIGNAL_SIGKILL" || value === 9) return "SIGKILL";
  if (value === "SIGNAL_SIGTERM" || value === 15) return "SIGTERM";
  throw new ConnectError("invalid_argument", `signal: must be SIGNAL_SIGKILL or SIGNAL_SIGTERM (got ${JSON.stringify(value)})`);
}

/** envd answers invalid_argument for a missing cwd and for a command that cannot start. */
async function startError(error: unknown, sandbox: EnvdSandbox, cwd: string, config: ProcessConfig): Promise<unknown> {
  if (error instanceof ConnectError || error instanceof HttpError) return error;
  if (error instanceof SandboxError && error.code === "ENOENT") {
    const cwdExists = await sandbox.jail.files.stat(cwd, { follow: true }).then(
      (info) => info.type === "directory",
      () => false,
    );
    if (!cwdExists) return new ConnectError("invalid_argument", `cwd '${cwd}' does not exist`);
    return new ConnectError("invalid_argument", `error starting process '${[config.cmd, ...config.args].join(" ")}': exec: no such file or directory`);
  }
  // envd starts every command through /bin/sh (its OOM/nice wrapper): execve's E2BIG comes from there.
  if (error instanceof SandboxError && error.code === "E2BIG") {
    return new ConnectError("invalid_argument", `error starting process '${[config.cmd, ...config.args].join(" ")}': fork/exec /bin/sh: argument list too long`);
  }
  if (error instanceof SandboxError) return new ConnectError("invalid_argument", `error starting process: ${error.message}`);
  return error;
}
