import { execOnPty, type ExecExit, type ExecHandle, type OutputStreamName, type OutputSubscription, type PtyExec, type Sandbox as Jail } from "@paperclip-sandbox/sandbox-backend";

/** `process.ProcessConfig` as the SDKs send it (and List returns it). */
export interface ProcessConfig {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

/** `ProcessEvent.EndEvent` in proto3 JSON (default values left out, as envd's encoder does). */
export interface EndEvent {
  exitCode?: number;
  exited?: boolean;
  status: string;
  error?: string;
}

/** Which `DataEvent.output` a chunk goes out as: a PTY process's output is `pty`, never stdout/stderr. */
type DataName = OutputStreamName | "pty";

/** One attached stream (a Start or a Connect call): gets the output from when it attached, then the end. */
export interface ProcessListener {
  data(stream: DataName, bytes: Buffer): void;
  end(event: EndEvent): void;
  /** Output was lost before it could be delivered (the jail's buffer overflowed): end the stream loudly. */
  fail(reason: string): void;
  /** The listener's connection is congested: the process's output is read no further until it drains. */
  congested(): boolean;
  onceDrained(resume: () => void): void;
}

export interface ProcessEntry {
  readonly pid: number;
  readonly tag: string | undefined;
  readonly config: ProcessConfig;
  readonly handle: ExecHandle;
  /** The process's terminal when it was started with `pty` (resize, signals to the program on it). */
  readonly pty: PtyExec | undefined;
  readonly stdinEnabled: boolean;
  readonly listeners: Set<ProcessListener>;
  /** The end event, once the process has exited and its output was delivered. */
  readonly ended: Promise<EndEvent>;
}

/** Output events carry at most this much (envd reads its pipes 32 KiB at a time). */
const DATA_CHUNK_BYTES = 32 * 1024;
/**
 * Output kept per stream in the jail until it is delivered. The backend's buffer never blocks the
 * process (envd's pipe would), so a burst larger than this, written faster than it is read, loses
 * its oldest bytes; 8 MiB per stream still lets 16 processes run at once in the jail's 256 MiB budget.
 */
const OUTPUT_LIMIT_BYTES = 8 * 1024 * 1024;

/**
 * The running processes of one sandbox, as envd keeps them: one reader per process fans its output
 * out to every attached stream (a stream attached later sees only what follows, like envd's
 * multiplexer), the process outlives its streams, and a finished process is forgotten once its end
 * event went out (envd drops it from its table when it exits).
 */
export class ProcessTable {
  private readonly entries = new Map<number, ProcessEntry>();
  private readonly subscriptions = new Map<number, OutputSubscription>();
  /** Processes whose reader waits for congested listeners (one wait at a time). */
  private readonly holding = new Set<number>();

  constructor(private readonly jail: Jail) {}

  async start(input: {
    config: ProcessConfig;
    stdin: boolean;
    tag: string | undefined;
    cwd: string;
    env: Record<string, string>;
    first: ProcessListener;
    pty?: { cols: number; rows: number };
  }): Promise<ProcessEntry> {
    const common = {
      argv: [input.config.cmd, ...input.config.args],
      cwd: input.cwd,
      env: input.env,
      detached: true,
      ...(input.tag !== undefined ? { tag: input.tag } : {}),
      outputLimitBytes: OUTPUT_LIMIT_BYTES,
    };
    // As envd's pty.StartWithSize: the command leads a session on a terminal of that size; its input
    // is the terminal (no stdin pipe), its output one stream.
    const pty = input.pty ? await execOnPty(this.jail, { ...common, ...input.pty }) : undefined;
    const handle = pty ? pty.handle : await this.jail.exec({ ...common, stdin: input.stdin });
    const listeners = new Set<ProcessListener>([input.first]);
    let settle!: (event: EndEvent) => void;
    const ended = new Promise<EndEvent>((resolve) => (settle = resolve));
    const entry: ProcessEntry = { pid: handle.pid, tag: input.tag, config: input.config, handle, pty, stdinEnabled: pty ? false : input.stdin, listeners, ended };
    this.entries.set(handle.pid, entry);

    const subscription = handle.subscribe(
      { stdout: 0, stderr: 0 },
      {
        onData: (stream, data) => {
          const name: DataName = pty ? "pty" : stream;
          for (let at = 0; at < data.length; at += DATA_CHUNK_BYTES) {
            const piece = data.subarray(at, at + DATA_CHUNK_BYTES);
            for (const listener of listeners) listener.data(name, piece);
          }
          this.holdWhileCongested(entry, subscription);
        },
        onGap: (stream, from, to) => {
          for (const listener of [...listeners]) listener.fail(`${to - from} bytes of ${stream} were lost: the reader fell too far behind`);
          listeners.clear();
        },
      },
    );
    this.subscriptions.set(handle.pid, subscription);
    void subscription.done.then(
      (exit) => this.finish(entry, endEventOf(exit), settle),
      () => this.finish(entry, { exitCode: -1, status: "unknown", error: "the process's output could not be read" }, settle),
    );
    return entry;
  }

  get(pid: number): ProcessEntry | undefined {
    return this.entries.get(pid);
  }

  byTag(tag: string): ProcessEntry | undefined {
    for (const entry of this.entries.values()) if (entry.tag === tag) return entry;
    return undefined;
  }

  running(): ProcessEntry[] {
    return [...this.entries.values()];
  }

  /** Drops every reader (the sandbox is being destroyed). */
  closeAll(): void {
    for (const subscription of this.subscriptions.values()) subscription.close();
    for (const entry of this.entries.values()) entry.handle.close();
    this.subscriptions.clear();
    this.entries.clear();
  }

  private holdWhileCongested(entry: ProcessEntry, subscription: OutputSubscription): void {
    // Events already on their way keep arriving after pause(): one wait covers them all.
    if (this.holding.has(entry.pid)) return;
    const congested = [...entry.listeners].filter((listener) => listener.congested());
    if (congested.length === 0) return;
    this.holding.add(entry.pid);
    subscription.pause();
    let waiting = congested.length;
    for (const listener of congested) {
      listener.onceDrained(() => {
        waiting -= 1;
        if (waiting > 0) return;
        this.holding.delete(entry.pid);
        subscription.resume();
      });
    }
  }

  private finish(entry: ProcessEntry, event: EndEvent, settle: (event: EndEvent) => void): void {
    if (this.entries.get(entry.pid) === entry) this.entries.delete(entry.pid);
    this.subscriptions.delete(entry.pid);
    this.holding.delete(entry.pid);
    for (const listener of entry.listeners) listener.end(event);
    entry.listeners.clear();
    settle(event);
    entry.handle.close();
    void this.jail.reap(entry.pid).catch(() => undefined);
  }
}

/** Go's `ProcessState` wording, which envd copies into the end event. */
const SIGNAL_WORDS: Record<string, string> = {
  SIGKILL: "killed",
  SIGTERM: "terminated",
  SIGINT: "interrupt",
  SIGHUP: "hangup",
  SIGQUIT: "quit",
  SIGSEGV: "segmentation fault",
  SIGABRT: "aborted",
  SIGPIPE: "broken pipe",
  SIGUSR1: "user defined signal 1",
  SIGUSR2: "user defined signal 2",
};

function endEventOf(exit: ExecExit | null): EndEvent {
  if (exit === null) return { exitCode: -1, status: "unknown", error: "the process's output could not be read" };
  if (exit.signal) {
    const status = `signal: ${SIGNAL_WORDS[exit.signal] ?? exit.signal}`;
    return { exitCode: -1, status, error: status };
  }
  const code = exit.exitCode ?? -1;
  const status = `exit status ${code}`;
  return code === 0 ? { exited: true, status } : { exitCode: code, exited: true, status, error: status };
}
