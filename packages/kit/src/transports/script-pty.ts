import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import { shellQuote } from "../exec/quote.js";
import type { PtyExit, PtyProcess, PtySignal, PtySize, PtySpec, PtyTransport, ScriptRunner } from "../transport.js";
import { envPrologue } from "./inline-env.js";
import { checkPtySignal, hangUpPty } from "./pty-hangup.js";

/** The open failed: the sandbox cannot give this program a terminal (nothing was started). */
export class PtyUnavailableError extends Error {
  override name = "PtyUnavailableError";
}

export interface ScriptPtyOptions {
  /** Sandbox directory for the per-terminal control file (default `${TMPDIR:-/tmp}`). */
  ctlDir?: string;
  /** Grace between the hang-up and SIGKILL when a terminal is closed with its program still running. Default 1000 ms. */
  closeGraceMs?: number;
}

const MAX_DIMENSION = 10_000;
/** `script` could not start (missing, or no pseudo-terminal device in the sandbox). */
const NO_PTY_EXIT = 127;

/**
 * A shell line that resizes the terminal at `$<ttyVar>` in ONE window-size change, as a terminal
 * emulator does (so the program gets one SIGWINCH and reads the final size): python3's TIOCSWINSZ
 * where the sandbox has it, else `stty` (which sets rows and cols one after the other).
 */
export function ptyResizeLine(ttyVar: string, size: PtySize): string {
  const { cols, rows } = checkPtySize(size);
  const py = `import fcntl,os,struct,sys,termios; fd=os.open(sys.argv[1], os.O_RDWR|os.O_NOCTTY); fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', ${rows}, ${cols}, 0, 0))`;
  return `{ command -v python3 >/dev/null 2>&1 && python3 -c ${shellQuote(py)} "$${ttyVar}" 2>/dev/null; } || stty -F "$${ttyVar}" rows ${rows} cols ${cols} 2>/dev/null`;
}

/** A terminal size, refused unless both are whole numbers in 1..10000. */
export function checkPtySize(size: PtySize): PtySize {
  for (const [name, value] of [
    ["cols", size.cols],
    ["rows", size.rows],
  ] as const) {
    if (!Number.isInteger(value) || value < 1 || value > MAX_DIMENSION) throw new RangeError(`PTY ${name} must be a whole number from 1 to ${MAX_DIMENSION} (got ${String(value)})`);
  }
  return { cols: size.cols, rows: size.rows };
}

/**
 * Pseudo-terminals over any streamed runner, for sandboxes whose exec API has no PTY of its own
 * (the bubblewrap supervisor): util-linux `script` opens the terminal inside the sandbox and copies
 * between it and the command's stdin/stdout, so the program gets a real terminal (echo, line editing,
 * `^C` as SIGINT, its exit code through `script -e`). The session leader records its pid and terminal
 * in a 0600 control file; resize (`stty -F`) and signals are one more call each, against that file.
 * Needs a transport with streamed, binary-safe stdin and live output, and `script` in the sandbox
 * (Debian's `bsdutils`, always installed there; the open fails with {@link PtyUnavailableError} without it).
 * Its commands must start with default signal dispositions: not through `withRemoteGroupKill`, whose
 * job is an asynchronous list that ignores SIGINT (no shell below can undo that, so ^C would be lost).
 */
export function withScriptPty(inner: ScriptRunner, opts: ScriptPtyOptions = {}): ScriptRunner {
  const caps = inner.capabilities;
  if (caps.stdin !== "stream" || !caps.binarySafe || !caps.liveOutput) {
    throw new TypeError("withScriptPty needs a runner with streamed stdin, binary-safe bytes and live output");
  }
  const pty: PtyTransport = { open: (spec) => openScriptPty(inner, spec, opts) };
  return {
    capabilities: Object.freeze({ ...caps, pty: true }),
    run: (script, io) => inner.run(script, io),
    pty,
  };
}

async function openScriptPty(runner: ScriptRunner, spec: PtySpec, opts: ScriptPtyOptions): Promise<PtyProcess> {
  const size = checkPtySize(spec);
  if (spec.signal?.aborted) throw new PtyUnavailableError("the PTY open was aborted");
  const dir = opts.ctlDir === undefined ? `"\${TMPDIR:-/tmp}"` : shellQuote(opts.ctlDir);
  const ctl = `${dir}/.paperclip-pty.${randomBytes(12).toString("hex")}`;
  const closeGraceMs = opts.closeGraceMs ?? 1_000;

  // Inside the terminal: record "<pid> <tty>" (the pid leads the session and its process group),
  // set the size, then become the program. `$$` is the session leader's pid even in the subshell.
  const onTerminal = [
    `(umask 077; printf '%s %s\\n' "$$" "$(tty)" >"$__pc_pty_ctl")`,
    `stty cols ${size.cols} rows ${size.rows} 2>/dev/null`,
    `__pc_s=$__pc_pty_script; unset __pc_pty_ctl __pc_pty_script`,
    `exec /bin/sh -c "$__pc_s"`,
  ].join("; ");
  const outer = [
    `command -v script >/dev/null 2>&1 || { echo "paperclip: the sandbox has no 'script' (util-linux) to open a pseudo-terminal" >&2; exit ${NO_PTY_EXIT}; }`,
    `__pc_pty_ctl=${ctl}; export __pc_pty_ctl`,
    `__pc_pty_script=${shellQuote(spec.script)}; export __pc_pty_script`,
    spec.cwd === undefined ? "" : `cd ${shellQuote(spec.cwd)} || exit ${NO_PTY_EXIT}`,
    envPrologue(spec.env).trimEnd(),
    // Not exec'd: the control file goes with the terminal, however the program ended.
    `SHELL=/bin/sh script -q -e -c ${shellQuote(onTerminal)} /dev/null; __pc_rc=$?`,
    `rm -f -- "$__pc_pty_ctl"`,
    `exit "$__pc_rc"`,
  ]
    .filter((line) => line.length > 0)
    .join("\n");

  const stdin = new PassThrough();
  const stop = new AbortController();
  let stderr = Buffer.alloc(0);
  let sawOutput = false;
  let ended = false;
  const run = runner.run(outer, {
    stdin,
    stdout: (chunk) => {
      sawOutput = true;
      spec.onData(chunk);
    },
    stderr: (chunk) => {
      stderr = Buffer.concat([stderr, chunk]).subarray(-4096);
    },
    signal: stop.signal,
    killGraceMs: closeGraceMs,
  });
  const exited: Promise<PtyExit> = run.then(
    (exit) => ({ exitCode: exit.exitCode, signal: exit.signal }),
    () => ({ exitCode: null, signal: null }),
  );
  void exited.then(() => {
    ended = true;
    stdin.destroy();
  });

  /** A second call against the control file (waits for it while the terminal is still starting). */
  const control = async (action: string): Promise<void> => {
    const script = [
      `__pc_i=0; while [ ! -s ${ctl} ] && [ "$__pc_i" -lt 50 ]; do sleep 0.05; __pc_i=$((__pc_i + 1)); done`,
      `[ -s ${ctl} ] || exit 0`,
      `read -r __pc_pid __pc_tty < ${ctl} || exit 0`,
      action,
    ].join("\n");
    await runner.run(script, {});
  };
  const signalGroup = (signal: PtySignal) => control(`kill -${signal.slice(3)} "-$__pc_pid" 2>/dev/null || kill -${signal.slice(3)} "$__pc_pid" 2>/dev/null; exit 0`);

  // The open answers once the terminal exists or the program has already gone: a sandbox without
  // `script` is an error of the open, not a program that exits at once.
  const ready = await Promise.race([control("exit 0").then(() => "ready" as const), exited.then(() => "ended" as const)]);
  if (ready === "ended" && !sawOutput) {
    const exit = await exited;
    if (exit.exitCode === NO_PTY_EXIT) {
      const why = stderr.toString("utf8").trim();
      throw new PtyUnavailableError(why.length > 0 ? why : "the sandbox could not open a pseudo-terminal");
    }
  }

  let writes: Promise<void> = Promise.resolve();
  let closing: Promise<void> | undefined;
  return {
    exited,
    write(bytes) {
      const next = writes.then(async () => {
        if (ended || stdin.destroyed || bytes.length === 0) return;
        if (!stdin.write(bytes))
          await new Promise<void>((resolve) => {
            const done = () => {
              stdin.off("drain", done);
              stdin.off("close", done);
              resolve();
            };
            stdin.once("drain", done);
            stdin.once("close", done);
          });
      });
      writes = next.catch(() => undefined);
      return next;
    },
    async resize(next) {
      const checked = checkPtySize(next);
      if (ended) return;
      await control(`${ptyResizeLine("__pc_tty", checked)}; exit 0`);
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
          stop.abort();
        }
        stdin.destroy();
        await exited;
      })();
      return closing;
    },
  };
}
