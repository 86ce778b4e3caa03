import { AsyncResource } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import os from "node:os";
import { PassThrough, type Readable, Writable } from "node:stream";
import { shellQuote } from "../../exec/quote.js";
import { abortedExit, timedOutExit, type ScriptExit, type ScriptIo, type ScriptRunner } from "../../transport.js";
import { envPrologue } from "../inline-env.js";
import { scriptSink, type ScriptSink } from "../script-sink.js";
import { bootstrapScript, type ChannelImplementation } from "./bootstrap.js";
import { ackLine, creditLine, quitLine, eofLine, killLine, parseReply, ProtocolError, ReplyReader, runLine, stdinLine, type Hello, type Reply, type StdinMode } from "./protocol.js";

/**
 * Output a command may have in flight before the host takes it (a function sink takes it on
 * arrival, a Writable once it has drained). It bounds what a vendor buffers for a slow stream.
 */
const OUTPUT_WINDOW = 1024 * 1024;
/** Stdin bytes in flight per command before the sandbox reports them taken. */
const STDIN_WINDOW = 1024 * 1024;
const STDIN_PIECE = 256 * 1024;
/** Known stdin up to this size rides in the run request itself. */
const INLINE_STDIN_MAX = 256 * 1024;
const DEFAULT_KILL_GRACE_MS = 250;

/** The command never started on the channel: running it another way cannot run it twice. */
export class CommandNotStartedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CommandNotStartedError";
  }
}

/** The channel broke while the command ran: its outcome is unknown (its process group was ended). */
export class CommandChannelLostError extends Error {
  readonly code = "COMMAND_CHANNEL_LOST";
  constructor(message: string) {
    super(message);
    this.name = "CommandChannelLostError";
  }
}

/** The channel could not start here (and why), or is gone. */
export class ChannelUnavailableError extends Error {
  constructor(
    message: string,
    /** True when this image can never run it (no interpreter): not worth trying again for the lease. */
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = "ChannelUnavailableError";
  }
}

export interface SessionOptions {
  /** The fresh-exec runner: its capabilities rule commands, and it runs recovery. */
  inner: ScriptRunner;
  /**
   * Runs the one long exec the multiplexer lives in, when that is not `inner` (a raw terminal).
   * Such a carrier may have no EOF short of ending the exec, so a close asks the multiplexer to quit
   * (`Q`) once its commands are done rather than ending its input.
   */
  carrier?: ScriptRunner;
  implementations: readonly ChannelImplementation[];
  /** The hello must arrive within this (ms). */
  startTimeoutMs: number;
  /** A command sent must be reported started (or refused) within this, or the channel is taken as hung (ms). */
  ackTimeoutMs: number;
  /** Graceful close waits this long for the multiplexer to exit before ending it (ms). */
  closeTimeoutMs: number;
  /** A command ended by a signal reports exit status 128 + n (as the shell would), not the signal. */
  signalsAsExitStatus: boolean;
  log?: (message: string) => void;
}

/** sent: not yet acknowledged; started: running; ended: its end arrived, output still being delivered. */
type JobState = "sent" | "started" | "ended" | "done";

interface Job {
  id: number;
  state: JobState;
  sentAt: number;
  pid?: number;
  aborted: boolean;
  stdout: ScriptSink;
  stderr: ScriptSink;
  /** Output window in force (0: unbounded). */
  window: number;
  /** A sink is a Writable: deliveries wait for it to drain, in order. */
  writable: boolean;
  delivered: number;
  credited: number;
  /** Deliveries to Writable sinks, in order. */
  queue: Promise<void>;
  stdinCredit: number;
  /**
   * Runs a delivery in the async context of the command's caller: output arrives on the channel's
   * stream, which an earlier caller opened, and a host SDK ties live output (`ctx.execution.log`)
   * to the invocation in its async context.
   */
  scope: AsyncResource;
  creditWaiter?: () => void;
  stopStdin?: () => void;
  pendingStdin?: { source: Readable | Buffer };
  settle(outcome: { exit?: ScriptExit; error?: Error }): void;
  detach(): void;
}

export type SessionState = "starting" | "ready" | "closing" | "dead";

/**
 * One multiplexer in the sandbox, over one long exec of `inner`: starts it, runs commands over it
 * (framed stdin, stdout, stderr, exit, group kill, deadline), and when it breaks, settles every
 * command it held: one not started is refused (`CommandNotStartedError`, safe to run elsewhere),
 * one that ran is ended and reported lost. Which is which comes from the claims the multiplexer
 * makes before it starts a command, read by one recovery exec.
 */
export class ChannelSession {
  state: SessionState = "starting";
  hello: Hello | undefined;
  readonly ready: Promise<Hello>;
  /** Settles once the session is dead and every command it held is settled. */
  readonly ended: Promise<void>;
  /** Commands run to completion over this channel. */
  completed = 0;
  readonly startedAt = Date.now();
  /** Why it ended, when that was not a close (a break, a failed start). */
  broken: Error | undefined;
  /** Runner for the recovery exec (the newest fresh-exec runner of the lease). */
  recovery: ScriptRunner;

  private readonly jobs = new Map<number, Job>();
  private seq = 0;
  private settledUpTo = 0;
  private readonly settledIds = new Set<number>();
  private readonly input = new PassThrough();
  private readonly control = new AbortController();
  private readonly exited: Promise<unknown>;
  private stderrTail = "";
  private resolveReady!: (hello: Hello) => void;
  private rejectReady!: (error: Error) => void;
  private resolveEnded!: () => void;
  private dying: Promise<void> | undefined;
  /** Waiters for the last command in flight to settle (a draining close). */
  private drained: Array<() => void> = [];
  private watchdog: NodeJS.Timeout | undefined;
  private startTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: SessionOptions) {
    this.recovery = opts.inner;
    this.ready = new Promise<Hello>((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => undefined);
    this.ended = new Promise<void>((resolve) => (this.resolveEnded = resolve));
    const reader = new ReplyReader((line, payload) => this.onLine(line, payload));
    const stateDir = `.paperclip-cc-${randomBytes(12).toString("hex")}`;
    this.startTimer = setTimeout(() => void this.die(new ChannelUnavailableError(`no hello from the command channel within ${opts.startTimeoutMs} ms`, false)), opts.startTimeoutMs);
    this.startTimer.unref?.();
    this.exited = (opts.carrier ?? opts.inner)
      .run(bootstrapScript(stateDir, opts.implementations), {
        stdin: this.input,
        stdout: (chunk) => {
          if (this.state === "dead") return;
          try {
            reader.push(chunk);
          } catch (error) {
            void this.die(error as Error);
          }
        },
        stderr: (chunk) => {
          this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-2000);
        },
        signal: this.control.signal,
      })
      .then(
        (exit) =>
          void this.die(
            new ChannelUnavailableError(`the command channel's exec ended (${exit.exitCode ?? exit.signal ?? "aborted"})${this.stderrTail ? `: ${this.stderrTail.trim().slice(-300)}` : ""}`, false),
          ),
        (error: unknown) => void this.die(error instanceof Error ? error : new Error(String(error))),
      );
  }

  get inFlight(): number {
    return this.jobs.size;
  }

  /** Runs one script over the channel; rejects `CommandNotStartedError` when it never ran there. */
  async run(script: string, io: ScriptIo): Promise<ScriptExit> {
    if (this.state === "starting") {
      try {
        await this.ready;
      } catch (error) {
        throw new CommandNotStartedError(`the command channel did not start: ${(error as Error).message}`);
      }
    }
    if (this.state !== "ready") throw new CommandNotStartedError(`the command channel is ${this.state}`);
    if (io.signal?.aborted) return abortedExit();
    const stdinSource = io.stdin;
    const known = knownStdin(stdinSource);
    const streamFeature = this.hello!.features.includes("stream");
    const mode: StdinMode = stdinSource === undefined || stdinSource === null ? "n" : known !== undefined && known.length <= INLINE_STDIN_MAX ? "i" : "s";
    if (mode === "s" && !streamFeature) throw new CommandNotStartedError("this channel implementation takes no streamed stdin");
    const prologue = io.env && Object.keys(io.env).length > 0 ? envPrologue(io.env) : "";
    const windowed = this.hello!.features.includes("window");
    const id = ++this.seq;
    const graceMs = io.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
    const timeoutMs = this.opts.inner.capabilities.remoteTimeout && io.timeoutMs ? io.timeoutMs : 0;

    return new Promise<ScriptExit>((resolve, reject) => {
      const onAbort = () => {
        const job = this.jobs.get(id);
        if (!job || job.state === "done" || job.aborted) return;
        job.aborted = true;
        this.write(killLine(id, graceMs));
      };
      const job: Job = {
        id,
        state: "sent",
        sentAt: Date.now(),
        aborted: false,
        stdout: scriptSink(io.stdout),
        stderr: scriptSink(io.stderr),
        window: windowed ? OUTPUT_WINDOW : 0,
        writable: io.stdout instanceof Writable || io.stderr instanceof Writable,
        delivered: 0,
        credited: 0,
        queue: Promise.resolve(),
        stdinCredit: STDIN_WINDOW,
        scope: new AsyncResource("PaperclipCommandChannelCommand"),
        ...(mode === "s" ? { pendingStdin: { source: known ?? (stdinSource as Readable) } } : {}),
        settle: (outcome) => {
          if (job.state === "done") return;
          job.state = "done";
          job.detach();
          if (outcome.error) return reject(outcome.error);
          resolve(outcome.exit!);
        },
        detach: () => {
          this.jobs.delete(id);
          if (this.jobs.size === 0) for (const resolve of this.drained.splice(0)) resolve();
          this.markSettled(id);
          io.signal?.removeEventListener("abort", onAbort);
          job.stopStdin?.();
          job.creditWaiter?.();
        },
      };
      this.jobs.set(id, job);
      io.signal?.addEventListener("abort", onAbort, { once: true });
      this.write(
        runLine({
          id,
          ack: this.settledUpTo,
          mode,
          timeoutMs,
          graceMs,
          window: job.window,
          script: Buffer.from(prologue + script, "utf8"),
          ...(mode === "i" ? { inline: known! } : {}),
        }),
      );
      this.armWatchdog();
    });
  }

  /**
   * Ends the channel: no new commands; commands in flight finish (waited for up to `drainMs`: a
   * release that keeps the lease must not end the work of a run that resumed it meanwhile); the
   * multiplexer exits at EOF once they are done, or is ended `closeTimeoutMs` later.
   */
  async close(drainMs = 0): Promise<void> {
    if (this.state === "dead") return this.ended;
    if (this.state !== "closing") {
      this.state = "closing";
      this.write(ackLine(this.settledUpTo));
      // A carrier's input end may end its exec at once (a terminal's socket closes): the
      // multiplexer is asked instead, and exits once the commands in flight are done.
      if (this.opts.carrier) this.write(quitLine());
      else this.input.end();
    }
    if (drainMs > 0 && this.jobs.size > 0) {
      let drainTimer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.drained.push(resolve)),
        this.ended,
        new Promise<void>((resolve) => {
          drainTimer = setTimeout(resolve, drainMs);
          drainTimer.unref?.();
        }),
      ]);
      clearTimeout(drainTimer);
    }
    const timer = setTimeout(() => void this.die(new ChannelUnavailableError("the command channel did not exit when closed", false)), this.opts.closeTimeoutMs);
    timer.unref?.();
    await this.ended;
    clearTimeout(timer);
  }

  /** Ends the channel at once (its exec is aborted); commands in flight are settled as when it breaks. */
  kill(reason: string): Promise<void> {
    return this.die(new ChannelUnavailableError(reason, false));
  }

  private write(line: string): void {
    if (this.state === "dead" || this.input.writableEnded) return;
    this.input.write(line);
  }

  private markSettled(id: number): void {
    this.settledIds.add(id);
    while (this.settledIds.has(this.settledUpTo + 1)) {
      this.settledIds.delete(this.settledUpTo + 1);
      this.settledUpTo += 1;
    }
  }

  private onLine(line: string, payload?: Buffer): void {
    let reply: Reply;
    try {
      reply = parseReply(line, payload);
    } catch (error) {
      // Before the hello the shell may still be talking (a login banner): not ours to judge yet.
      if (this.state === "starting") return this.opts.log?.(`command channel: ignored before hello: ${line.slice(0, 120)}`);
      return void this.die(error as Error);
    }
    if (reply.kind === "hello" || reply.kind === "unavailable") {
      if (this.state !== "starting") return void this.die(new ProtocolError("a second hello"));
      clearTimeout(this.startTimer);
      if (reply.kind === "unavailable") return void this.die(new ChannelUnavailableError(`the sandbox can run no in-sandbox side: ${reply.reason}`, true));
      this.hello = reply.hello;
      this.state = "ready";
      this.resolveReady(reply.hello);
      return;
    }
    const job = this.jobs.get(reply.id);
    if (!job) return; // a late credit or output of a command already settled
    switch (reply.kind) {
      case "started":
        job.state = "started";
        job.pid = reply.pid;
        this.markSettled(reply.id);
        if (job.pendingStdin) this.pumpStdin(job, job.pendingStdin.source);
        this.armWatchdog();
        return;
      case "refused":
        return job.settle({ error: new CommandNotStartedError(`the channel did not start the command: ${reply.why}`) });
      case "stdout":
      case "stderr":
        return this.deliver(job, reply.kind === "stdout" ? job.stdout : job.stderr, reply.bytes);
      case "credit":
        job.stdinCredit += reply.bytes;
        job.creditWaiter?.();
        return;
      case "done": {
        const exit = exitOf(reply, job, this.opts.signalsAsExitStatus);
        job.state = "ended";
        job.queue = job.queue.then(() => job.scope.runInAsyncScope(() => Promise.all([job.stdout.end(), job.stderr.end()]))).then(() => undefined);
        void job.queue.then(() => {
          this.completed += 1;
          job.settle({ exit });
        });
        return;
      }
    }
  }

  private deliver(job: Job, sink: ScriptSink, bytes: Buffer): void {
    if (!job.writable) {
      // A function sink takes the bytes now: delivered, in order, without a queue.
      void job.scope.runInAsyncScope(() => sink.write(bytes));
      this.taken(job, bytes.length);
      return;
    }
    job.queue = job.queue.then(async () => {
      await job.scope.runInAsyncScope(() => sink.write(bytes));
      this.taken(job, bytes.length);
    });
  }

  /** Output taken by the command's sink: past half a window, the sandbox gets the credit back. */
  private taken(job: Job, bytes: number): void {
    if (job.window === 0) return;
    job.delivered += bytes;
    if (job.delivered - job.credited >= job.window / 2 && this.jobs.has(job.id)) {
      this.write(creditLine(job.id, job.delivered - job.credited));
      job.credited = job.delivered;
    }
  }

  private pumpStdin(job: Job, source: Readable | Buffer): void {
    let stopped = false;
    job.stopStdin = () => {
      stopped = true;
      if (!Buffer.isBuffer(source)) source.resume();
    };
    const send = async (bytes: Buffer) => {
      for (let at = 0; at < bytes.length && !stopped; at += STDIN_PIECE) {
        const piece = bytes.subarray(at, at + STDIN_PIECE);
        while (job.stdinCredit < piece.length && !stopped) await new Promise<void>((resolve) => (job.creditWaiter = resolve));
        job.creditWaiter = undefined;
        if (stopped) return;
        job.stdinCredit -= piece.length;
        this.write(stdinLine(job.id, piece));
      }
    };
    void (async () => {
      if (Buffer.isBuffer(source)) await send(source);
      else
        for await (const raw of source) {
          if (stopped) continue;
          await send(typeof raw === "string" ? Buffer.from(raw, "utf8") : (raw as Buffer));
        }
      if (!stopped) this.write(eofLine(job.id));
    })().catch(() => undefined);
  }

  /** A command sent but never acknowledged means the channel is hung: it is ended and recovered. */
  private armWatchdog(): void {
    if (this.watchdog) return;
    const tick = () => {
      this.watchdog = undefined;
      if (this.state === "dead") return;
      let oldest = Infinity;
      for (const job of this.jobs.values()) if (job.state === "sent") oldest = Math.min(oldest, job.sentAt);
      if (oldest === Infinity) return;
      const waited = Date.now() - oldest;
      if (waited >= this.opts.ackTimeoutMs) return void this.die(new ChannelUnavailableError(`the command channel did not acknowledge a command within ${this.opts.ackTimeoutMs} ms`, false));
      this.watchdog = setTimeout(tick, this.opts.ackTimeoutMs - waited);
      this.watchdog.unref?.();
    };
    this.watchdog = setTimeout(tick, this.opts.ackTimeoutMs);
    this.watchdog.unref?.();
  }

  /** The channel is over: end its exec, then settle every command it held. Runs once. */
  private die(cause: Error): Promise<void> {
    if (this.dying) return this.dying;
    const wasReady = this.hello !== undefined;
    const graceful = this.state === "closing";
    if (!graceful) this.broken = cause;
    this.state = "dead";
    clearTimeout(this.startTimer);
    clearTimeout(this.watchdog);
    this.rejectReady(cause instanceof ChannelUnavailableError ? cause : new ChannelUnavailableError(cause.message, false));
    this.dying = (async () => {
      this.control.abort();
      this.input.end();
      await withTimeout(this.exited, 10_000);
      // A command whose end already arrived settles from its own deliveries.
      const held = [...this.jobs.values()].filter((job) => job.state === "sent" || job.state === "started");
      if (held.length > 0) {
        if (!graceful) this.opts.log?.(`command channel broke with ${held.length} command(s) in flight: ${cause.message}`);
        await this.recover(held, wasReady);
      }
    })().finally(() => this.resolveEnded());
    return this.dying;
  }

  /**
   * One exec decides each held command: a claim we can still take means it never started (refused,
   * so it may run elsewhere); a claim the multiplexer took means it ran: its group is ended and it is
   * reported lost (or aborted, when that was asked). The state directory goes with it.
   */
  private async recover(held: Job[], wasReady: boolean): Promise<void> {
    const dir = this.hello?.stateDir;
    if (!wasReady || dir === undefined) {
      for (const job of held) job.settle({ error: new CommandNotStartedError("the command channel never started") });
      return;
    }
    const sent = held.filter((job) => job.state === "sent").map((job) => job.id);
    const started = held.filter((job) => job.state === "started" && job.pid !== undefined).map((job) => job.pid!);
    const script = [
      `__pc_d=${shellQuote(dir)}; __pc_pg='${started.join(" ")}'`,
      `for __pc_i in ${sent.join(" ") || ":"}; do`,
      `  [ "$__pc_i" = : ] && continue`,
      `  if [ ! -d "$__pc_d" ] || mkdir -- "$__pc_d/$__pc_i" 2>/dev/null; then echo "$__pc_i free"; continue; fi`,
      `  __pc_p=$(cat "$__pc_d/$__pc_i/pid" 2>/dev/null); echo "$__pc_i ran"; [ -n "$__pc_p" ] && __pc_pg="$__pc_pg $__pc_p"`,
      `done`,
      `for __pc_p in $__pc_pg; do kill -TERM "-$__pc_p" 2>/dev/null; done`,
      `[ -z "$__pc_pg" ] || sleep ${(DEFAULT_KILL_GRACE_MS / 1000).toFixed(2)}`,
      `for __pc_p in $__pc_pg; do kill -KILL "-$__pc_p" 2>/dev/null; done`,
      `rm -rf -- "$__pc_d"`,
    ].join("\n");
    let verdicts = "";
    try {
      const exit = await this.recovery.run(script, { stdout: (chunk) => (verdicts += chunk.toString("utf8")) });
      if (exit.exitCode !== 0) throw new Error(`the recovery exec ended with ${exit.exitCode ?? exit.signal}`);
    } catch (error) {
      for (const job of held) {
        job.settle({
          error: new CommandChannelLostError(`the command channel broke and the sandbox could not be asked whether the command ran (${(error as Error).message}): its outcome is unknown`),
        });
      }
      return;
    }
    const free = new Set(
      verdicts
        .split("\n")
        .filter((line) => line.endsWith(" free"))
        .map((line) => Number(line.split(" ")[0])),
    );
    for (const job of held) {
      if (job.state === "sent" && free.has(job.id)) job.settle({ error: new CommandNotStartedError("the command channel broke before the command started") });
      else if (job.aborted) job.settle({ exit: abortedExit("SIGTERM", job.pid || undefined) });
      else job.settle({ error: new CommandChannelLostError("the command channel broke while the command ran: its output and exit status are lost, and its process group was ended") });
    }
  }
}

function exitOf(done: Extract<Reply, { kind: "done" }>, job: Job, signalsAsExitStatus: boolean): ScriptExit {
  const pid = job.pid !== undefined ? { pid: job.pid } : {};
  if (job.aborted) return abortedExit(done.signal ?? "SIGTERM", job.pid);
  if (done.timedOut) return timedOutExit(done.signal ?? "SIGKILL", job.pid);
  if (done.signal) {
    const number = (os.constants.signals as Record<string, number | undefined>)[done.signal];
    if (signalsAsExitStatus && number !== undefined) return { exitCode: 128 + number, signal: null, reason: "exit", ...pid };
    return { exitCode: null, signal: done.signal, reason: "signal", ...pid };
  }
  return { exitCode: done.exitCode, signal: null, reason: "exit", ...pid };
}

/** The whole stdin when it is already in memory; undefined for a stream. */
function knownStdin(stdin: ScriptIo["stdin"]): Buffer | undefined {
  if (stdin === undefined || stdin === null) return Buffer.alloc(0);
  if (typeof stdin === "string") return Buffer.from(stdin, "utf8");
  if (Buffer.isBuffer(stdin)) return stdin;
  return undefined;
}

async function withTimeout(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise.catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
