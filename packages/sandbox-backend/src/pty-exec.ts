import { randomBytes } from "node:crypto";
import { ptyResizeLine, shellQuote } from "@paperclip-sandbox/kit";
import { SandboxExecError } from "./errors.js";
import type { ExecHandle, ExecOptions, Sandbox } from "./types.js";

/** A command on a pseudo-terminal in a jail, for the emulators' vendor PTY APIs. */
export interface PtyExecOptions extends Omit<ExecOptions, "script" | "stdin" | "argv"> {
  argv: string[];
  /** The terminal's size; 0 x 0 opens it without one (as an SSH pty-req that names no size). */
  cols: number;
  rows: number;
}

export interface PtyExec {
  /**
   * The exec: `write` types into the terminal, stdout is everything the terminal shows (stderr only
   * carries the wrapper's own failure), `exited` is the program's end (its exit code; 128 + n when a
   * signal n ended it, as `script -e` reports).
   */
  readonly handle: ExecHandle;
  /** The program's pid in the jail (the terminal's session leader), once it has started. */
  programPid(): Promise<number>;
  resize(cols: number, rows: number): Promise<void>;
  /** Signals the program (its pid, or with `group` its whole session group), as a vendor's kill reaches it. */
  signal(signal: NodeJS.Signals, options?: { group?: boolean }): Promise<void>;
}

const MAX_DIMENSION = 10_000;
/** The wrapper could not give the command a terminal (no util-linux `script`). */
const NO_PTY_EXIT = 127;

/** `least` 0 allows a terminal opened without a size (an SSH pty-req of 0 x 0), as a kernel PTY starts. */
function checkSize(cols: number, rows: number, least = 1): void {
  for (const [name, value] of [
    ["cols", cols],
    ["rows", rows],
  ] as const) {
    if (!Number.isInteger(value) || value < least || value > MAX_DIMENSION) throw new RangeError(`PTY ${name} must be a whole number from ${least} to ${MAX_DIMENSION} (got ${String(value)})`);
  }
}

/**
 * Runs `argv` on a real pseudo-terminal in the jail: util-linux `script` (from the jail's `/usr`)
 * opens the terminal and relays it to the exec's stdin/stdout, the program leads the terminal's
 * session (so `^C` and a resize reach it as a terminal's would), and a 0600 control file in the
 * jail's `/tmp` records its pid and terminal for `resize` (`stty -F`) and `signal` (one more exec
 * each). The control file goes with the program.
 */
export async function execOnPty(jail: Sandbox, options: PtyExecOptions): Promise<PtyExec> {
  const { argv, cols, rows, env, ...rest } = options;
  if (!Array.isArray(argv) || argv.length === 0 || argv.some((a) => typeof a !== "string")) throw new TypeError("argv must be a non-empty list of strings");
  checkSize(cols, rows, 0);
  const ctl = `/tmp/.paperclip-pty.${randomBytes(12).toString("hex")}`;
  const onTerminal = [`(umask 077; printf '%s %s\\n' "$$" "$(tty)" >${ctl})`, `stty cols ${cols} rows ${rows} 2>/dev/null`, `exec ${argv.map(shellQuote).join(" ")}`].join("; ");
  const script = [
    `command -v script >/dev/null 2>&1 || { echo "no 'script' (util-linux) in the sandbox to open a pseudo-terminal" >&2; exit ${NO_PTY_EXIT}; }`,
    `SHELL=/bin/sh script -q -e -c ${shellQuote(onTerminal)} /dev/null; __pc_rc=$?`,
    `rm -f -- ${ctl}`,
    `exit "$__pc_rc"`,
  ].join("\n");
  const handle = await jail.exec({ ...rest, script, stdin: true, env: { TERM: "xterm-256color", ...env } });

  let known: { pid: number; tty: string } | undefined;
  const control = async (): Promise<{ pid: number; tty: string }> => {
    if (known) return known;
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const text = await jail.files.read(ctl, { maxBytes: 256 }).then(
        (b) => b.toString("utf8"),
        () => "",
      );
      const match = /^(\d+) (\/dev\/\S+)\n$/.exec(text);
      if (match) return (known = { pid: Number(match[1]), tty: match[2]! });
      const done = await Promise.race([
        handle.exited.then(
          () => true,
          () => true,
        ),
        new Promise<false>((resolve) => setTimeout(() => resolve(false), 20)),
      ]);
      if (done) break;
    }
    throw new SandboxExecError("ESRCH", "the program on the pseudo-terminal is not running");
  };
  const side = async (argvOfSide: string[]) => {
    const run = await jail.exec({ argv: argvOfSide });
    await run.exited;
    run.close();
  };

  return {
    handle,
    programPid: async () => (await control()).pid,
    async resize(nextCols, nextRows) {
      checkSize(nextCols, nextRows);
      const { tty } = await control();
      // One window-size change, as envd's pty.Setsize makes: the program reads the final size.
      await side(["/bin/sh", "-c", ptyResizeLine("1", { cols: nextCols, rows: nextRows }), "sh", tty]);
    },
    async signal(signal, opts = {}) {
      const { pid } = await control();
      // dash's kill takes `-SIG -PGID` (no `--`).
      await side(["/bin/sh", "-c", `kill -${signal.replace(/^SIG/, "")} "$1"`, "sh", opts.group ? `-${pid}` : String(pid)]);
    },
  };
}
