import type { ContainerProcess, Sandbox } from "modal";
import { envPrologue, shellQuote, startLinePty, TransportLimitError, type PtyExit, type PtyTransport, type ScriptRunner } from "@paperclip-sandbox/kit";
import { MODAL_ARGV_LIMIT, type ModalRunnerOptions } from "./transport.js";

export interface ModalPtyOptions extends ModalRunnerOptions {
  /** How long the exec may take to start the program. Default 60 s. */
  startTimeoutMs?: number;
  /** Grace between the hang-up and SIGKILL when a terminal is closed with its program running. Default 1000 ms. */
  closeGraceMs?: number;
}

/**
 * Modal's own pseudo-terminals: `sandbox.exec(argv, {pty: true})` runs the command on a terminal
 * (the SDK's `pty_info`: 24x80, `xterm-256color`), its output comes back on stdout, input goes in
 * as stdin writes (the terminal echoes it, `^C` is a SIGINT). The SDK fixes the size and has no
 * resize or signal call, so a wrapper sets the size in the terminal (`stty`), applies env and cwd,
 * prints the kit's start line (its pid and terminal) and execs the program; resizes and signals are
 * one runner call each against that terminal and process group.
 */
export function modalPty(sandbox: Sandbox, runner: ScriptRunner, options: ModalPtyOptions): PtyTransport {
  return startLinePty({
    runner,
    launcher: "the terminal's command",
    writeError: (error) => options.error("execStdin", error),
    ...(options.startTimeoutMs === undefined ? {} : { startTimeoutMs: options.startTimeoutMs }),
    ...(options.closeGraceMs === undefined ? {} : { closeGraceMs: options.closeGraceMs }),
    async launch(spec, size, startLine) {
      const wrapper = [
        envPrologue(spec.env).trimEnd(),
        spec.cwd === undefined ? "" : `cd ${shellQuote(spec.cwd)} || exit 127`,
        `stty cols ${size.cols} rows ${size.rows} 2>/dev/null`,
        startLine.shellLine,
        `exec /bin/sh -c ${shellQuote(spec.script)}`,
      ]
        .filter((line) => line.length > 0)
        .join("\n");
      const argv = ["/bin/sh", "-c", wrapper];
      const bytes = argv.reduce((sum, arg) => sum + Buffer.byteLength(arg, "utf8"), 0);
      if (bytes > MODAL_ARGV_LIMIT) throw new TransportLimitError(`modal: this terminal's command is ${bytes} bytes of arguments; Modal's exec takes at most ${MODAL_ARGV_LIMIT} (nothing was sent)`);

      const process: ContainerProcess<Uint8Array> = await options.retry("execStart", () => sandbox.exec(argv, { pty: true, mode: "binary", stdout: "pipe", stderr: "pipe" }));
      const stdin = process.stdin.getWriter();
      return {
        exited: (async (): Promise<PtyExit> => {
          const [code] = await Promise.allSettled([process.wait(), pump(process.stdout, (chunk) => startLine.push(chunk)), drain(process.stderr)]);
          return code.status === "fulfilled" && code.value >= 0 ? { exitCode: code.value, signal: null } : { exitCode: null, signal: null };
        })(),
        write: (data) => stdin.write(new Uint8Array(data)),
        // No resize or signal call in the SDK: the kit's window-size change and group signals through the runner.
        dispose: () => stdin.releaseLock(),
      };
    },
  });
}

/** The terminal's bytes into `deliver`, in order. */
async function pump(stream: ReadableStream<Uint8Array>, deliver: (chunk: Uint8Array) => void): Promise<void> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (value && value.length > 0) deliver(value);
    }
  } finally {
    reader.releaseLock();
  }
}

/** A terminal has no separate stderr; whatever comes is read and dropped so the stream ends. */
async function drain(stream: ReadableStream<Uint8Array>): Promise<void> {
  await pump(stream, () => undefined);
}
