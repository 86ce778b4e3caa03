/** A command's timeout when the kit gives none (its own sync scripts, a duplex channel): the bridge's maximum. */
export const NO_TIMEOUT_MS = 86_400_000;

/**
 * Session names for one lease. A 0.7.x session runs one command at a time (and a timed-out one keeps
 * it busy), while Paperclip runs commands of a lease concurrently (the agent, the bridge polls, an
 * abort's kill): each command takes a session no other command of this worker is using, and gives
 * it back when it ends. `paperclip`, then `paperclip-2`, ... so a quiet lease uses one session.
 */
export class SessionPool {
  private readonly free: string[] = [];
  private made = 0;
  constructor(private readonly base: string) {}

  take(): string {
    const name = this.free.pop();
    if (name !== undefined) return name;
    this.made += 1;
    return this.made === 1 ? this.base : `${this.base}-${this.made}`;
  }

  give(name: string): void {
    this.free.push(name);
  }
}

export interface RunnerTarget {
  providerLeaseId: string;
  sessionStrategy: "named" | "default";
  sessions: SessionPool;
}

/** Runs `fn` with a session of the lease no other command of this worker is using. */
export async function inSession<T>(target: RunnerTarget, fn: (sessionId: string) => Promise<T>): Promise<T> {
  const session = target.sessionStrategy === "named" ? target.sessions.take() : "default";
  try {
    return await fn(session);
  } finally {
    // A timed-out command's session was deleted by the bridge; the name is made again on next use.
    if (target.sessionStrategy === "named") target.sessions.give(session);
  }
}
