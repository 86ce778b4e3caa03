import type { ContainerProcess, Sandbox } from "modal";
import {
  awaitPtyStart,
  checkPtySignal,
  checkPtySize,
  hangUpPty,
  envPrologue,
  ptyResizeLine,
  PtyStartLine,
  PtyUnavailableError,
  shellQuote,
  TransportLimitError,
  type PtyExit,
  type PtyProcess,
  type PtySignal,
  type PtyTransport,
  type ScriptRunner,
} from "@paperclip-sandbox/kit";
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
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const closeGraceMs = options.closeGraceMs ?? 1_000;

  return {
    async open(spec) {
      const size = checkPtySize(spec);
      if (spec.signal?.aborted) throw new PtyUnavailableError("the PTY open was aborted");
      const startLine = new PtyStartLine((bytes) => spec.onData(bytes));
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
      const exited: Promise<PtyExit> = (async () => {
        const [code] = await Promise.allSettled([process.wait(), pump(process.stdout, (chunk) => startLine.push(chunk)), drain(process.stderr)]);
        return code.status === "fulfilled" && code.value >= 0 ? { exitCode: code.value, signal: null } : { exitCode: null, signal: null };
      })();
      let ended = false;
      void exited.then(() => (ended = true));
      const stdin = process.stdin.getWriter();

      /** One runner call against the program's process group (it leads the terminal's session). */
      const signalGroup = async (signal: PtySignal) => {
        const pid = startLine.started?.pid;
        if (pid === undefined) return;
        const name = signal.slice(3);
        await runner.run(`kill -${name} -${pid} 2>/dev/null || kill -${name} ${pid} 2>/dev/null; exit 0`, {});
      };

      const outcome = await awaitPtyStart(startLine, exited, { timeoutMs: startTimeoutMs, ...(spec.signal ? { signal: spec.signal } : {}) });
      if (outcome !== "started") {
        const tail = startLine.startupTail();
        await signalGroup("SIGKILL").catch(() => undefined);
        stdin.releaseLock();
        throw new PtyUnavailableError(
          outcome === "ended"
            ? `the terminal's command ended before the program started${tail ? `: ${tail}` : ""}`
            : outcome === "aborted"
              ? "the PTY open was aborted"
              : `the program did not start on the terminal within ${startTimeoutMs} ms`,
        );
      }
      const tty = startLine.started!.tty;

      let writes: Promise<void> = Promise.resolve();
      let closing: Promise<void> | undefined;
      const result: PtyProcess = {
        exited,
        write(data) {
          const next = writes.then(async () => {
            if (ended || data.length === 0) return;
            await stdin.write(new Uint8Array(data));
          });
          writes = next.catch(() => undefined);
          return next.catch((error: unknown) => {
            throw options.error("execStdin", error);
          });
        },
        async resize(next) {
          const checked = checkPtySize(next);
          if (ended || !tty.startsWith("/dev/")) return;
          await runner.run(`__pc_tty=${shellQuote(tty)}; ${ptyResizeLine("__pc_tty", checked)}; exit 0`, {});
        },
        async kill(signal = "SIGTERM") {
          checkPtySignal(signal);
          if (ended) return;
          await signalGroup(signal);
        },
        close() {
          closing ??= (async () => {
            if (!ended) {
              await hangUpPty({ exited, signalGroup, forceEnd: () => signalGroup("SIGKILL").catch(() => undefined), graceMs: closeGraceMs });
            }
            await exited;
            await writes;
            stdin.releaseLock();
          })();
          return closing;
        },
      };
      return result;
    },
  };
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
