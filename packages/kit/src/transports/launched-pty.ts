import { randomBytes } from "node:crypto";
import { shellQuote } from "../exec/quote.js";
import type { PtyExit, PtyProcess, PtySignal, PtySize, PtySpec, PtyTransport, ScriptRunner } from "../transport.js";
import { envPrologue } from "./inline-env.js";
import { checkPtySignal, endsWithin, hangUpPty } from "./pty-hangup.js";
import { checkPtySize, ptyResizeLine, PtyUnavailableError } from "./script-pty.js";

/** A vendor's terminal channel: a command on a pseudo-terminal, bytes both ways, ending with the command. */
export interface TerminalChannel {
  /** Bytes to the terminal, in call order. */
  write(bytes: Buffer): Promise<void>;
  /**
   * Settles once the command has ended and every output byte was delivered: with its exit status
   * when the vendor reports one (null otherwise, or when the channel was lost). Never rejects.
   */
  readonly ended: Promise<{ exitCode: number | null; detail?: string }>;
  /** The vendor's own resize of the terminal (a window-change); absent: TIOCSWINSZ from a control call. */
  resize?(size: PtySize): Promise<void>;
  /** Drops the channel (what it leaves running is ended by the launcher's control file). */
  close(): void;
}

export interface LaunchedPtyOptions {
  /** Names the sandbox in errors. */
  name: string;
  /** Plain commands in the same sandbox: staging the program, resize, signals, the exit status. */
  control: ScriptRunner;
  /**
   * Opens the vendor's terminal running `command` (a shell command line) at `size`, every output
   * byte to `onData`. Rejects when the vendor refuses it.
   */
  openChannel(command: string, size: PtySize, term: string, onData: (bytes: Buffer) => void): Promise<TerminalChannel>;
  /** The channel reports the command's exit status (an SSH channel); otherwise it is read back from the sandbox. */
  channelExitStatus: boolean;
  /** Grace between the hang-up and SIGKILL when a terminal is closed with its program running. Default 1000 ms. */
  closeGraceMs?: number;
}

/** The launcher found no terminal, or could not start the program: nothing was started. */
const NO_PTY_EXIT = 127;
/** The launcher's words when the channel has no terminal (its stderr may arrive as terminal output). */
const NO_TERMINAL = "paperclip: no terminal";

/**
 * Pseudo-terminals over a vendor's terminal channel (`ssh -tt`, Coder's reconnecting PTY), whatever
 * the channel lacks supplied in the sandbox: the program and its environment are staged first over
 * the control runner into a 0600 file (no URL or command line carries them), and the channel runs
 * a fixed launcher on it that records its pid (the session leader) and terminal in a 0600 control
 * file, puts the terminal in a sane state at the asked size, and runs the program as its child with
 * default signal dispositions, so a death by signal n is 128 + n. Where the channel reports no exit
 * status the launcher leaves it in a file read back once the channel has ended. Resize is the
 * channel's own where it has one, else TIOCSWINSZ from a control call (the program gets SIGWINCH
 * either way); signals to the session's group are one control call each; close
 * hangs the session up, then SIGKILL, then drops the channel (a reconnecting PTY outlives its socket).
 */
export function launchedPty(options: LaunchedPtyOptions): PtyTransport {
  return { open: (spec) => open(options, spec) };
}

async function open(options: LaunchedPtyOptions, spec: PtySpec): Promise<PtyProcess> {
  const size = checkPtySize(spec);
  if (spec.signal?.aborted) throw new PtyUnavailableError("the PTY open was aborted");
  const closeGraceMs = options.closeGraceMs ?? 1_000;
  const program = [
    // Its own path names the control and status files (the program's environment may set TMPDIR).
    `__pc_ctl=\${0%.sh}; __pc_rcf=\${0%.sh}.rc`,
    `rm -f -- "$0"`,
    `__pc_end() { ${options.channelExitStatus ? "" : `(umask 077; printf '%s' "$1" >"$__pc_rcf"); `}rm -f -- "$__pc_ctl"; exit "$1"; }`,
    `[ -t 0 ] && [ -t 1 ] || { echo "${NO_TERMINAL}: ${options.name} gave the session no pseudo-terminal" >&2; __pc_end ${NO_PTY_EXIT}; }`,
    `(umask 077; printf '%s %s\\n' "$$" "$(tty)" >"$__pc_ctl")`,
    `stty sane 2>/dev/null; stty cols ${size.cols} rows ${size.rows} 2>/dev/null`,
    spec.cwd === undefined ? "" : `cd ${shellQuote(spec.cwd)} || __pc_end ${NO_PTY_EXIT}`,
    envPrologue(spec.env).trimEnd(),
    // Traps (not ignores): the child starts with default dispositions, this shell outlives it.
    `trap : INT TERM HUP QUIT`,
    `/bin/sh -c ${shellQuote(spec.script)}`,
    `__pc_end "$?"`,
  ]
    .filter((line) => line.length > 0)
    .join("\n");
  // Staged where the control runner's TMPDIR points, the path resolved once and used as is after
  // (the terminal's shell may see another TMPDIR). set -C: a planted file is refused, not written through.
  let where = "";
  const staged = await options.control.run(`umask 077; set -C; __pc_b="\${TMPDIR:-/tmp}/.paperclip-pty.${randomBytes(12).toString("hex")}"; cat > "$__pc_b.sh" && printf '%s' "$__pc_b"`, {
    stdin: program,
    stdout: (chunk) => (where += chunk.toString("utf8")),
  });
  if (staged.exitCode !== 0 || !/^\/[^\n\0]*\/\.paperclip-pty\.[0-9a-f]{24}$/.test(where)) {
    throw new PtyUnavailableError(`${options.name}: could not stage the terminal's program in the sandbox's temporary directory`);
  }
  const launcher = shellQuote(`${where}.sh`);
  const ctl = shellQuote(where);
  const status = shellQuote(`${where}.rc`);

  let sawOutput = false;
  let head = "";
  let channel: TerminalChannel;
  try {
    channel = await options.openChannel(`exec /bin/sh ${launcher}`, size, spec.env?.TERM ?? "dumb", (bytes) => {
      sawOutput = true;
      if (head.length < 512) head += bytes.toString("utf8");
      spec.onData(bytes);
    });
  } catch (error) {
    await options.control.run(`rm -f -- ${launcher}`, {}).catch(() => undefined);
    throw error;
  }

  let ended = false;
  let channelDetail: string | undefined;
  const exited: Promise<PtyExit> = channel.ended
    .then(async ({ exitCode, detail }) => {
      channelDetail = detail;
      if (options.channelExitStatus) return { exitCode, signal: null };
      const read = await readStatus(options.control, status);
      return { exitCode: read, signal: null };
    })
    .catch(() => ({ exitCode: null, signal: null }))
    .then((exit) => {
      ended = true;
      spec.signal?.removeEventListener("abort", onAbort);
      return exit;
    });

  /** One more call against the control file (waits for it while the terminal is still starting). */
  const control = async (action: string): Promise<void> => {
    const script = [
      `__pc_i=0; while [ ! -s ${ctl} ] && [ "$__pc_i" -lt 100 ]; do sleep 0.05; __pc_i=$((__pc_i + 1)); done`,
      `[ -s ${ctl} ] || exit 0`,
      `read -r __pc_pid __pc_tty < ${ctl} || exit 0`,
      action,
    ].join("\n");
    await options.control.run(script, {});
  };
  const signalGroup = (signal: PtySignal) => control(`kill -${signal.slice(3)} "-$__pc_pid" 2>/dev/null || kill -${signal.slice(3)} "$__pc_pid" 2>/dev/null; exit 0`);

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      if (!ended) {
        const gone = await hangUpPty({ exited, signalGroup, forceEnd: () => signalGroup("SIGKILL").catch(() => undefined), graceMs: closeGraceMs });
        if (!gone && !(await endsWithin(exited, closeGraceMs))) channel.close();
      }
      await exited;
      channel.close();
    })();
    return closing;
  };
  const onAbort = () => void close();
  spec.signal?.addEventListener("abort", onAbort, { once: true });

  // The open answers once the terminal exists or the program has already gone: a sandbox that gives
  // no terminal is an error of the open, not a program that exits at once.
  const ready = await Promise.race([control("exit 0").then(() => "ready" as const), exited.then(() => "ended" as const)]);
  if (ready === "ended") {
    const exit = await exited;
    const refused = exit.exitCode === NO_PTY_EXIT && head.includes(NO_TERMINAL);
    if (refused || (!sawOutput && (exit.exitCode === NO_PTY_EXIT || exit.exitCode === null))) {
      await options.control.run(`rm -f -- ${launcher}`, {}).catch(() => undefined);
      throw new PtyUnavailableError(channelDetail?.trim() || (refused ? `${options.name} gave the session no pseudo-terminal` : `${options.name}: the session could not open a pseudo-terminal`));
    }
  }

  let writes: Promise<void> = Promise.resolve();
  return {
    exited,
    write(bytes) {
      const next = writes.then(() => (ended || bytes.length === 0 ? undefined : channel.write(bytes)));
      writes = next.catch(() => undefined);
      return next;
    },
    async resize(next) {
      const checked = checkPtySize(next);
      if (ended) return;
      if (channel.resize) await channel.resize(checked);
      else await control(`${ptyResizeLine("__pc_tty", checked)}; exit 0`);
    },
    async kill(signal = "SIGTERM") {
      checkPtySignal(signal);
      if (ended) return;
      await signalGroup(signal);
      // Also where the control call cannot reach the session (a vendor that runs each call in a
      // PID namespace of its own): dropping the channel ends it (sshd hangs up, boxd's cancel kills).
      if (signal === "SIGKILL") channel.close();
    },
    close,
  };
}

/** The exit status the launcher left (removed once read); null when there is none. */
async function readStatus(control: ScriptRunner, file: string): Promise<number | null> {
  let text = "";
  const exit = await control.run(`cat ${file} 2>/dev/null; rm -f -- ${file}`, { stdout: (chunk) => (text += chunk.toString("utf8")) });
  if (exit.exitCode !== 0) return null;
  return /^\d{1,3}$/.test(text.trim()) ? Number(text.trim()) : null;
}
