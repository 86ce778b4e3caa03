import { createFileStdioRunner, withRemoteGroupKill, type FileTransport, type ScriptRunner } from "@paperclip-sandbox/kit";
import type { BridgeClient } from "./bridge-client.js";

/** A command's timeout when the kit gives none (its own sync scripts): the bridge's maximum. */
const NO_TIMEOUT_MS = 86_400_000;

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

/** The bridge's file routes (our bridge only): one streamed request each way. */
export function bridgeFiles(client: BridgeClient, providerLeaseId: string): FileTransport {
  return {
    upload: (path, source, opts) => client.upload(providerLeaseId, path, source, opts?.mode, opts?.signal),
    download: (path, opts) => client.download(providerLeaseId, path, opts?.signal),
  };
}

/**
 * The bridge's `POST /exec` (upstream's contract: no stdin stream, text output) as a full
 * ScriptRunner: the kit's file-stdio runner carries stdout, stderr and the exit status back base64
 * between markers (binary-safe, whatever the container does to text: 0.7.x drops the last newline of
 * a foreground command's output), stdin rides in the script or, with our bridge's file routes, is
 * uploaded first; the bridge enforces the deadline; an abort ends the group from a second command.
 * One bridge request per command.
 */
export function bridgeRunner(client: BridgeClient, target: RunnerTarget, files: FileTransport | undefined): ScriptRunner {
  return withRemoteGroupKill(
    createFileStdioRunner({
      ...(files ? { files } : {}),
      remoteTimeout: true,
      exec: async ({ command, timeoutMs, signal }) => {
        const session = target.sessionStrategy === "named" ? target.sessions.take() : "default";
        try {
          const answer = await client.exec(
            { providerLeaseId: target.providerLeaseId, command: "/bin/sh", args: ["-c", command], timeoutMs: timeoutMs ?? NO_TIMEOUT_MS, sessionStrategy: target.sessionStrategy, sessionId: session },
            signal,
          );
          // The 0.7.x container re-joins a foreground command's output lines, dropping the last
          // newline; the markers' parser wants the exit line whole.
          return { exitCode: answer.exitCode, output: `${answer.stdout}\n`, timedOut: answer.timedOut };
        } finally {
          // A timed-out command's session was deleted by the bridge; the name is made again on next use.
          if (target.sessionStrategy === "named") target.sessions.give(session);
        }
      },
    }),
  );
}
