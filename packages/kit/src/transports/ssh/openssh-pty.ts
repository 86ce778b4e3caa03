import { spawn } from "node:child_process";
import type { PtyTransport, ScriptRunner } from "../../transport.js";
import { launchedPty, type TerminalChannel } from "../launched-pty.js";

export interface OpenSshPtyDeps {
  /** Names the server in errors. */
  name: string;
  /** The ssh client and its environment. */
  ssh: string;
  env: Record<string, string>;
  /** ssh's options for a channel on the shared connection (no `-T`, no destination). */
  channelArgs: readonly string[];
  /** `-p <port> [-l user] -- host`. */
  target: readonly string[];
  /** Opens the shared connection (or checks it is up). */
  connect(): Promise<void>;
  /** Plain channels on the same connection: staging the program, resize and signals. */
  control: ScriptRunner;
  /** Grace between the hang-up and SIGKILL when a terminal is closed with its program running. Default 1000 ms. */
  closeGraceMs?: number;
}

/**
 * Pseudo-terminals over the session's SSH connection, as `ssh -tt` gives them: sshd's own terminal
 * (no helper needed in the sandbox), the program launched on it by the kit's `launchedPty` (staged
 * in a 0600 file, a control file for resize and signals). A multiplexed client has no local
 * terminal, so its pty-req carries neither modes nor a size: the launcher sets both. The exit
 * status is the channel's (ssh's own, 255 when the connection failed, counts as unknown).
 * Closing the channel makes sshd hang the terminal up.
 */
export function openSshPty(deps: OpenSshPtyDeps): PtyTransport {
  return launchedPty({
    name: deps.name,
    control: deps.control,
    channelExitStatus: true,
    closeGraceMs: deps.closeGraceMs,
    openChannel: async (command, _size, term, onData) => {
      await deps.connect();
      const child = spawn(deps.ssh, [...deps.channelArgs, "-tt", "-o", "EscapeChar=none", ...deps.target, command], {
        // A multiplexed client sends its TERM with the pty-req.
        env: { ...deps.env, TERM: term },
        stdio: ["pipe", "pipe", "pipe"],
      });
      let stderr = "";
      child.stdout.on("data", onData);
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", (text: string) => (stderr = (stderr + text).slice(-4096)));
      child.stdin.on("error", () => undefined);
      const ended = new Promise<{ exitCode: number | null; detail?: string }>((resolve) => {
        child.once("error", (error) => resolve({ exitCode: null, detail: error.message }));
        // `close`: both output pipes are drained, so every byte went to onData first.
        child.once("close", (code) => resolve({ exitCode: code === null || code === 255 ? null : code, detail: stderr }));
      });
      const channel: TerminalChannel = {
        ended,
        write: (bytes) =>
          new Promise<void>((resolve) => {
            if (child.stdin.destroyed || child.stdin.write(bytes)) return resolve();
            const done = () => {
              child.stdin.off("drain", done);
              child.stdin.off("close", done);
              resolve();
            };
            child.stdin.once("drain", done);
            child.stdin.once("close", done);
          }),
        close: () => {
          child.stdin.destroy();
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        },
      };
      return channel;
    },
  });
}
