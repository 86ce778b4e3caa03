import { abortedExit, type ScriptExit, type ScriptIo, type ScriptRunner, type TransportCapabilities } from "../../transport.js";
import { DEFAULT_IMPLEMENTATIONS, type ChannelImplementation } from "./bootstrap.js";
import type { Hello } from "./protocol.js";
import { ChannelSession, ChannelUnavailableError, CommandNotStartedError } from "./session.js";

export interface CommandChannelOptions {
  /**
   * The lease this runner serves. Runners are made per call; the channel is found again by this
   * key, and `closeCommandChannel(lease)` (the lifecycle layer calls it at release) ends it.
   */
  lease: string;
  /**
   * False: the runner is returned unchanged (every command a fresh exec). Default true, unless the
   * worker's environment sets `PAPERCLIP_SANDBOX_COMMAND_CHANNEL=off` (or `0`): for benchmarks and
   * conformance runs (the host itself gives plugin workers none of its environment).
   */
  enabled?: boolean;
  /**
   * Runs the channel's one long-lived exec (the multiplexer) instead of `inner`, which keeps running
   * the fresh-exec fallbacks and the recovery exec. Default `inner`. For a vendor whose exec stdin
   * is costly but that has another duplex, e.g. a terminal: binary both ways in raw mode (`stty raw
   * -echo`), its output live on `io.stdout`, and the end of `io.stdin` ending the exec (a raw terminal
   * has no EOF). A channel over a carrier is closed by a quit request (`Q`): the multiplexer exits
   * once its commands are done, and only then does the carrier's input end. It needs streamed stdin
   * and live output.
   */
  carrier?: ScriptRunner;
  /**
   * Whether sync may stream over this channel (`commandChannelCarriesSync`). Default true; false
   * keeps sync on the file API or fresh execs (commands still use the channel).
   */
  carriesSync?: boolean;
  /** A channel with no command for this long is closed (ms, default 60 s). */
  idleMs?: number;
  /** The in-sandbox side must say hello within this (ms, default 30 s). */
  startTimeoutMs?: number;
  /** A command must be acknowledged within this, or the channel is taken as hung (ms, default 10 s). */
  ackTimeoutMs?: number;
  /** Implementations to try in the sandbox, in order (default: node). */
  implementations?: readonly ChannelImplementation[];
  /**
   * A command that finds no channel starts one and waits for it (default false: it runs as a fresh
   * exec while the channel starts beside it). For tests that must exercise the channel path.
   */
  waitForStart?: boolean;
  /**
   * Report a command ended by a signal as the shell does (exit status 128 + n, no signal), as a
   * fresh exec under `withRemoteGroupKill` reports it. Default false: the signal's name, as a
   * runner with native group signals reports it.
   */
  signalsAsExitStatus?: boolean;
  /** First restart delay after a failed start or a break, doubling to 5 minutes (ms, default 1 s). */
  restartDelayMs?: number;
  /** Starts, fallbacks and breaks, in words. */
  log?: (message: string) => void;
}

/** What a lease's channel is doing, for probes, benchmarks and tests. */
export interface CommandChannelStatus {
  state: "none" | "starting" | "ready" | "closing" | "backoff" | "unavailable";
  /** The in-sandbox implementation of the live channel (`node v20.1.0`), or of the last one. */
  implementation?: string;
  /** Why it is unavailable or backing off. */
  reason?: string;
  /** The multiplexer's pid in the sandbox, while one is ready. */
  pid?: number;
  overChannel: number;
  fresh: number;
  starts: number;
  breaks: number;
}

interface LeaseChannel {
  session?: ChannelSession;
  /** Some channel said hello on this lease: commands may wait for a starting one. */
  everReady: boolean;
  /** Sync may stream over it (`carriesSync`). */
  carriesSync: boolean;
  failures: number;
  retryAt: number;
  unavailable?: string;
  lastImplementation?: string;
  lastReason?: string;
  idle?: NodeJS.Timeout;
  stats: { overChannel: number; fresh: number; starts: number; breaks: number };
}

const channels = new Map<string, LeaseChannel>();
/** Where channels report when their options name no `log` (the lifecycle layer sets the worker's log). */
let defaultLog: ((message: string) => void) | undefined;

export function setCommandChannelLog(log: ((message: string) => void) | undefined): void {
  defaultLog = log;
}

const DEFAULTS = { idleMs: 60_000, startTimeoutMs: 30_000, ackTimeoutMs: 10_000, closeTimeoutMs: 5_000, closeDrainMs: 30_000 };
/** Restart delays after a failed start or a break: 1 s doubling to 5 minutes. */
const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 5 * 60_000;
/** A channel that lived this long resets the backoff. */
const HEALTHY_AFTER_MS = 60_000;

/**
 * A worker's environment may set `PAPERCLIP_SANDBOX_COMMAND_CHANNEL`: `off` (or `0`, `false`) turns
 * channels off, `always` makes every command wait for the channel (`waitForStart`), so a
 * conformance run covers one path or the other whole.
 */
export const COMMAND_CHANNEL_SWITCH = "PAPERCLIP_SANDBOX_COMMAND_CHANNEL";

/**
 * `PAPERCLIP_SANDBOX_SYNC_CHANNEL=off` (or `0`, `false`) keeps sync off the channel (commands still
 * use it): sync then moves as it would without a channel. For benchmarks (the before and after of
 * sync over the channel in one run), and a way back should a vendor's file API move bulk faster.
 */
export const SYNC_CHANNEL_SWITCH = "PAPERCLIP_SANDBOX_SYNC_CHANNEL";

function switchValue(): string | undefined {
  return process.env[COMMAND_CHANNEL_SWITCH]?.trim().toLowerCase();
}

function switchedOff(): boolean {
  const value = switchValue();
  return value === "off" || value === "0" || value === "false";
}

/**
 * Whether sync may stream over the lease's channel now: it is ready (a command sent now costs no
 * vendor call; should it break first, the command runs as a vendor exec, once) and sync over it is
 * not switched off.
 */
export function commandChannelCarriesSync(lease: string): boolean {
  const value = process.env[SYNC_CHANNEL_SWITCH]?.trim().toLowerCase();
  if (value === "off" || value === "0" || value === "false") return false;
  const channel = channels.get(lease);
  const session = channel?.carriesSync ? channel.session : undefined;
  // A channel without streamed stdin would send a tar's stream to a vendor exec after all.
  return session?.state === "ready" && session.hello?.features.includes("stream") === true;
}

/** Whether a transport can carry a channel: streamed stdin and live output. */
export function canCarryCommandChannel(capabilities: TransportCapabilities): boolean {
  return capabilities.stdin === "stream" && capabilities.liveOutput;
}

/**
 * Runs a lease's commands over one long-lived multiplexer in the sandbox instead of one vendor exec
 * each. The first command of a lease runs as a fresh exec, and the channel starts when it is done; later
 * commands go over the channel (no vendor exec; a stdin write where the vendor bills one). Commands
 * keep a fresh exec's semantics: `sh -c` as the sandbox user, in a process group of its own, the
 * exec's working directory and environment plus `io.env`, stdin then EOF, stdout and stderr apart,
 * an abort ending the group, the deadline when the runner has one.
 *
 * It is an optimisation, never a dependency: when the channel cannot start (no interpreter, the
 * vendor ends long execs), breaks or is closed, the command runs as a fresh exec and the channel
 * restarts in the background (with backoff). A command is never run twice: the multiplexer claims
 * each command in the sandbox before starting it, and after a break one recovery exec reads the
 * claims; a command that did start is ended and reported lost (as a broken exec stream is).
 *
 * A transport without streamed stdin or live output gets its runner back unchanged.
 */
export function withCommandChannel(inner: ScriptRunner, given: CommandChannelOptions): ScriptRunner {
  if (given.enabled === false || switchedOff() || !canCarryCommandChannel((given.carrier ?? inner).capabilities)) return inner;
  const log = given.log ?? ((message: string) => defaultLog?.(message));
  const options = { ...given, log, ...(switchValue() === "always" ? { waitForStart: true } : {}) };
  const key = options.lease;
  return {
    capabilities: inner.capabilities,
    async run(script: string, io: ScriptIo): Promise<ScriptExit> {
      const lease = leaseChannel(key);
      lease.carriesSync = options.carriesSync !== false;
      if (io.signal?.aborted) return abortedExit();
      if (options.waitForStart) ensureStarted(key, lease, inner, options);
      const session = lease.session;
      if (session) session.recovery = inner;
      // A script the vendor's exec would refuse (its argv limit) goes there to be refused: a command
      // must not work or fail depending on which path it took.
      const withinLimit = inner.capabilities.maxScriptBytes === undefined || Buffer.byteLength(script, "utf8") <= inner.capabilities.maxScriptBytes;
      if (session && withinLimit && (session.state === "ready" || (session.state === "starting" && (lease.everReady || options.waitForStart)))) {
        clearTimeout(lease.idle);
        try {
          const exit = await session.run(script, io);
          lease.stats.overChannel += 1;
          return exit;
        } catch (error) {
          if (!(error instanceof CommandNotStartedError)) throw error;
        } finally {
          armIdle(lease, session, options);
        }
      }
      lease.stats.fresh += 1;
      const exit = await inner.run(script, io);
      // Started once a vendor exec has worked here (a transport may learn from it: Kubernetes
      // learns whether the server can half-close stdin), and only on a lease still in use.
      if (channels.get(key) === lease) ensureStarted(key, lease, inner, options);
      return exit;
    },
  };
}

/**
 * Ends a lease's channel; the lifecycle layer calls it before release. Commands in flight finish
 * first, waited for up to `drainMs` (default 30 s, the release's own drain): the host may resume a
 * kept lease for its next run before the previous run's release arrives, and that release must not
 * end the new run's commands (a fresh exec per command would not).
 */
export async function closeCommandChannel(lease: string, drainMs = DEFAULTS.closeDrainMs): Promise<void> {
  const channel = channels.get(lease);
  if (!channel) return;
  channels.delete(lease);
  clearTimeout(channel.idle);
  await channel.session?.close(drainMs);
}

/** Ends every channel of this process (worker shutdown, tests): commands in flight are not waited for. */
export async function closeAllCommandChannels(): Promise<void> {
  await Promise.all([...channels.keys()].map((lease) => closeCommandChannel(lease, 0)));
}

export function commandChannelStatus(lease: string): CommandChannelStatus {
  const channel = channels.get(lease);
  if (!channel) return { state: "none", overChannel: 0, fresh: 0, starts: 0, breaks: 0 };
  const session = channel.session;
  const state: CommandChannelStatus["state"] = channel.unavailable ? "unavailable" : session && session.state !== "dead" ? session.state : channel.retryAt > Date.now() ? "backoff" : "none";
  return {
    state,
    ...(channel.lastImplementation ? { implementation: channel.lastImplementation } : {}),
    ...(session?.hello && session.state !== "dead" ? { pid: session.hello.pid } : {}),
    ...(channel.unavailable ? { reason: channel.unavailable } : channel.lastReason ? { reason: channel.lastReason } : {}),
    ...channel.stats,
  };
}

/**
 * The lease's channel once its start has settled (ready, or failed and why): what a probe reports
 * after its first command, which started the channel beside it.
 */
export async function settledCommandChannel(lease: string, timeoutMs = DEFAULTS.startTimeoutMs): Promise<CommandChannelStatus> {
  const session = channels.get(lease)?.session;
  if (session && session.state === "starting") {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([session.ready.catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }
  return commandChannelStatus(lease);
}

/**
 * Starts a channel over `inner` and waits for its hello, then closes it: which in-sandbox side this
 * sandbox would run (`node v20.1.0`), or why none (for a probe).
 */
export async function probeCommandChannel(
  inner: ScriptRunner,
  options: Pick<CommandChannelOptions, "startTimeoutMs" | "implementations"> = {},
): Promise<{ ok: true; implementation: string; hello: Hello } | { ok: false; reason: string }> {
  if (!canCarryCommandChannel(inner.capabilities)) return { ok: false, reason: "this transport has no streamed stdin with live output" };
  const session = new ChannelSession({
    inner,
    implementations: options.implementations ?? DEFAULT_IMPLEMENTATIONS,
    startTimeoutMs: options.startTimeoutMs ?? DEFAULTS.startTimeoutMs,
    ackTimeoutMs: DEFAULTS.ackTimeoutMs,
    closeTimeoutMs: DEFAULTS.closeTimeoutMs,
    signalsAsExitStatus: false,
  });
  try {
    const hello = await session.ready;
    return { ok: true, implementation: describe(hello), hello };
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  } finally {
    await session.close();
  }
}

function leaseChannel(key: string): LeaseChannel {
  let channel = channels.get(key);
  if (!channel) {
    channel = { everReady: false, carriesSync: true, failures: 0, retryAt: 0, stats: { overChannel: 0, fresh: 0, starts: 0, breaks: 0 } };
    channels.set(key, channel);
  }
  return channel;
}

function describe(hello: Hello): string {
  return `${hello.implementation}${hello.version ? ` ${hello.version}` : ""}`;
}

/** Starts the lease's channel in the background, unless one is live, it cannot run here, or it is backing off. */
function ensureStarted(key: string, lease: LeaseChannel, inner: ScriptRunner, options: CommandChannelOptions): void {
  if (lease.unavailable || Date.now() < lease.retryAt) return;
  if (lease.session && lease.session.state !== "dead") return;
  const session = new ChannelSession({
    inner,
    ...(options.carrier ? { carrier: options.carrier } : {}),
    implementations: options.implementations ?? DEFAULT_IMPLEMENTATIONS,
    startTimeoutMs: options.startTimeoutMs ?? DEFAULTS.startTimeoutMs,
    ackTimeoutMs: options.ackTimeoutMs ?? DEFAULTS.ackTimeoutMs,
    closeTimeoutMs: DEFAULTS.closeTimeoutMs,
    signalsAsExitStatus: options.signalsAsExitStatus === true,
    ...(options.log ? { log: options.log } : {}),
  });
  lease.session = session;
  lease.stats.starts += 1;
  session.ready.then(
    (hello) => {
      lease.everReady = true;
      lease.lastImplementation = describe(hello);
      options.log?.(`command channel ready: ${lease.lastImplementation}`);
      armIdle(lease, session, options);
    },
    (error: Error) => {
      lease.lastReason = error.message;
      if (error instanceof ChannelUnavailableError && error.permanent) {
        lease.unavailable = error.message;
        options.log?.(`command channel unavailable, every command runs as a fresh exec: ${error.message}`);
      }
    },
  );
  void session.ended.then(() => {
    if (lease.session === session) lease.session = undefined;
    // Closed by release or when idle: nothing to hold against the next start.
    if (channels.get(key) !== lease || !session.broken) return;
    if (session.hello) lease.stats.breaks += 1;
    const healthy = session.hello !== undefined && Date.now() - session.startedAt >= HEALTHY_AFTER_MS;
    lease.failures = healthy ? 1 : lease.failures + 1;
    const delayMs = Math.min(BACKOFF_MAX_MS, (options.restartDelayMs ?? BACKOFF_BASE_MS) * 2 ** (lease.failures - 1));
    lease.retryAt = Date.now() + delayMs;
    if (session.hello) options.log?.(`command channel broke (${session.broken.message}); commands run as fresh execs, a restart may follow in ${delayMs} ms`);
  });
}

function armIdle(lease: LeaseChannel, session: ChannelSession, options: CommandChannelOptions): void {
  clearTimeout(lease.idle);
  if (session.state !== "ready" || session.inFlight > 0) return;
  lease.idle = setTimeout(() => {
    if (lease.session !== session || session.inFlight > 0) return;
    void session.close();
  }, options.idleMs ?? DEFAULTS.idleMs);
  lease.idle.unref?.();
}
