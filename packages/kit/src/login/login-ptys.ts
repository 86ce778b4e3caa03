import { randomUUID } from "node:crypto";
import type {
  PluginLoginPtyCloseParams,
  PluginLoginPtyCloseResult,
  PluginLoginPtyInputParams,
  PluginLoginPtyOpenParams,
  PluginLoginPtyOpenResult,
  PluginLoginPtyStopParams,
} from "@paperclipai/plugin-sdk/protocol";
import type { PluginLoginPtyClient } from "@paperclipai/plugin-sdk/types";
import type { PtyProcess, PtySize, ScriptRunner } from "../transport.js";
import { checkSessionHome, isLoginCommandKey, loginLaunchScript, LoginPtyError, sessionHomeScript } from "./login-command.js";

/**
 * The host's agent login on a real pseudo-terminal (`supportsLoginPty`: `onLoginPty{Open,Input,Stop,Close}`),
 * over any runner whose transport has a PTY.
 *
 * The host acquires a fresh lease for the login, opens a terminal on it naming a command KEY and a
 * session home, relays keystrokes and the program's output between it and the operator's browser,
 * reads `auth.json` under the session home with an execute of its own once the program has exited
 * 0, and releases (deletes) the lease. Here: the key maps to a fixed command, the session home is
 * re-validated exactly as the host validates it, made as a new 0700 directory and checked again in
 * the sandbox right before the command starts (no link, our owner, mode 0700); the terminal's bytes
 * go back as `loginPty.output` text (UTF-8 decoded as a stream: a character split between two
 * reads stays whole) and its end as one `loginPty.exit`, after the last output. Terminal bytes are
 * never logged: they carry the login's codes and tokens.
 */

export interface LoginLeaseScope {
  driverKey: string;
  companyId: string;
  environmentId: string;
  providerLeaseId: string;
}

export interface LoginPtysOptions {
  /**
   * The runner of the live lease the login runs on, and a signal that fires when that lease is
   * released or destroyed (the terminal ends with it). Throws when the lease is not one this worker
   * serves for this company and environment, or is not a fresh single-use lease.
   */
  leaseFor(scope: LoginLeaseScope): Promise<{ runner: ScriptRunner; leaseSignal?: AbortSignal }>;
  /** The host's notification client (`ctx.loginPty`); read at each use. */
  notify(): PluginLoginPtyClient | undefined;
  log?(message: string): void;
  /** The terminal's size (the host sends none): default 120 x 30, as the vendors' own login flows use. */
  size?: PtySize;
  /** Live login terminals per worker. Default 8. */
  maxSessions?: number;
  /** A stop sends SIGTERM, then SIGKILL after this. Default 2000 ms. */
  stopGraceMs?: number;
  /** A close answers within this even when the sandbox does not (the host retires a worker whose close it waits 10 s for). Default 5000 ms. */
  closeTimeoutMs?: number;
}

/** The host drops an output notification over 1,000,000 characters; pieces stay well below. */
export const MAX_LOGIN_OUTPUT_CHARS = 64 * 1024;

interface Session {
  readonly hostRouteId: string;
  readonly workerSessionId: string;
  readonly providerLeaseId: string;
  readonly process: PtyProcess;
  /** Settles once the program ended and `loginPty.exit` went out. */
  readonly done: Promise<void>;
  ended: boolean;
  killTimer?: NodeJS.Timeout;
}

export interface LoginPtys {
  open(params: PluginLoginPtyOpenParams): Promise<PluginLoginPtyOpenResult>;
  input(params: PluginLoginPtyInputParams): Promise<void>;
  stop(params: PluginLoginPtyStopParams): Promise<void>;
  close(params: PluginLoginPtyCloseParams): Promise<PluginLoginPtyCloseResult>;
  /** Ends every login terminal of a lease (at release or destroy). */
  closeLease(providerLeaseId: string): Promise<void>;
  /** Terminals known (open or ended, not yet closed): for tests and leak checks. */
  readonly size: number;
}

export function createLoginPtys(opts: LoginPtysOptions): LoginPtys {
  const byRoute = new Map<string, Session>();
  const bySession = new Map<string, Session>();
  const opening = new Set<string>();
  const size = opts.size ?? { cols: 120, rows: 30 };
  const maxSessions = opts.maxSessions ?? 8;
  const stopGraceMs = opts.stopGraceMs ?? 2_000;
  const closeTimeoutMs = opts.closeTimeoutMs ?? 5_000;

  const forget = (session: Session) => {
    if (byRoute.get(session.hostRouteId) === session) byRoute.delete(session.hostRouteId);
    if (bySession.get(session.workerSessionId) === session) bySession.delete(session.workerSessionId);
    clearTimeout(session.killTimer);
  };

  const endSession = async (session: Session): Promise<void> => {
    forget(session);
    await withinMs(session.process.close(), closeTimeoutMs);
    await withinMs(session.done, 250);
  };

  return {
    get size() {
      return byRoute.size;
    },

    async open(params) {
      const { hostRouteId } = params;
      if (typeof hostRouteId !== "string" || hostRouteId.length === 0) throw new LoginPtyError("LOGIN_PTY_INVALID_REQUEST", "hostRouteId must be a non-empty string");
      if (!isLoginCommandKey(params.loginCommandKey)) throw new LoginPtyError("LOGIN_PTY_INVALID_REQUEST", "loginCommandKey must be one of claude, codex, grok");
      const home = checkSessionHome(params.sessionHome);
      if (byRoute.has(hostRouteId) || opening.has(hostRouteId)) throw new LoginPtyError("LOGIN_PTY_INVALID_REQUEST", "a login terminal is already open for this hostRouteId");
      const live = [...byRoute.values()].filter((session) => !session.ended).length;
      if (live + opening.size >= maxSessions) throw new LoginPtyError("LOGIN_PTY_UNAVAILABLE", `too many login terminals open in this worker (limit ${maxSessions})`);
      opening.add(hostRouteId);
      try {
        const { runner, leaseSignal } = await opts.leaseFor(params);
        if (!runner.pty) throw new LoginPtyError("LOGIN_PTY_UNAVAILABLE", "this lease's transport has no pseudo-terminal");
        if (leaseSignal?.aborted) throw new LoginPtyError("LOGIN_PTY_UNAVAILABLE", "the lease is being released");

        let stderr = "";
        const made = await runner.run(sessionHomeScript(home), { stderr: (chunk) => (stderr = (stderr + chunk.toString("utf8")).slice(-2048)) });
        if (made.exitCode !== 0) {
          const reason = /LOGIN_PTY_HOME_REJECTED: (.*)/.exec(stderr)?.[1]?.trim();
          throw new LoginPtyError("LOGIN_PTY_HOME_REJECTED", reason ?? `the session home could not be made (exit ${made.exitCode ?? made.signal})`);
        }

        const workerSessionId = randomUUID();
        const decoder = new TextDecoder("utf-8");
        const emit = (text: string) => {
          const host = opts.notify();
          for (const piece of splitText(text, MAX_LOGIN_OUTPUT_CHARS)) host?.output(hostRouteId, workerSessionId, piece);
        };
        const process = await runner.pty.open({
          script: loginLaunchScript(params.loginCommandKey, home),
          ...size,
          env: { TERM: "xterm-256color" },
          onData: (bytes) => emit(decoder.decode(bytes, { stream: true })),
        });
        let session!: Session;
        const done = process.exited.then((exit) => {
          emit(decoder.decode());
          session.ended = true;
          clearTimeout(session.killTimer);
          opts.notify()?.exit(hostRouteId, workerSessionId, exit.exitCode);
        });
        session = { hostRouteId, workerSessionId, providerLeaseId: params.providerLeaseId, process, done, ended: false };
        byRoute.set(hostRouteId, session);
        bySession.set(workerSessionId, session);
        if (leaseSignal) {
          const onLeaseEnd = () => void endSession(session);
          leaseSignal.addEventListener("abort", onLeaseEnd, { once: true });
          void done.then(() => leaseSignal.removeEventListener("abort", onLeaseEnd));
        }
        opts.log?.(`login terminal opened (${params.loginCommandKey}) on lease ${params.providerLeaseId}`);
        return { workerSessionId };
      } catch (error) {
        opts.log?.(`login terminal could not open on lease ${params.providerLeaseId}: ${error instanceof Error ? error.message : String(error)}`);
        throw error;
      } finally {
        opening.delete(hostRouteId);
      }
    },

    async input(params) {
      const session = bySession.get(params.workerSessionId);
      if (!session) throw new LoginPtyError("LOGIN_PTY_NO_SESSION", "no open login terminal for this workerSessionId");
      if (typeof params.data !== "string") throw new LoginPtyError("LOGIN_PTY_INVALID_REQUEST", "data must be a string");
      if (session.ended || params.data.length === 0) return;
      // Handed over before any await: keystrokes reach the terminal in the order they arrived.
      await session.process.write(Buffer.from(params.data, "utf8"));
    },

    async stop(params) {
      const session = bySession.get(params.workerSessionId);
      if (!session) throw new LoginPtyError("LOGIN_PTY_NO_SESSION", "no open login terminal for this workerSessionId");
      if (session.ended) return;
      await session.process.kill("SIGTERM");
      if (!session.ended && !session.killTimer) {
        session.killTimer = setTimeout(() => void session.process.kill("SIGKILL").catch(() => undefined), stopGraceMs);
        session.killTimer.unref?.();
      }
    },

    async close(params) {
      const session = byRoute.get(params.hostRouteId);
      if (session) await endSession(session);
      return { hostRouteId: params.hostRouteId };
    },

    async closeLease(providerLeaseId) {
      await Promise.all([...byRoute.values()].filter((session) => session.providerLeaseId === providerLeaseId).map(endSession));
    },
  };
}

/** Pieces of at most `max` UTF-16 units, never splitting a surrogate pair. */
export function splitText(text: string, max: number): string[] {
  if (text.length === 0) return [];
  if (text.length <= max) return [text];
  const pieces: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + max, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
    pieces.push(text.slice(start, end));
    start = end;
  }
  return pieces;
}

async function withinMs(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work.catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
