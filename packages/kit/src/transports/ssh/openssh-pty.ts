import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { shellQuote } from "../../exec/quote.js";
import type { PtyExit, PtyProcess, PtySignal, PtySpec, PtyTransport, ScriptRunner } from "../../transport.js";
import { envPrologue } from "../inline-env.js";
import { checkPtySize, ptyResizeLine, PtyUnavailableError } from "../script-pty.js";

export interface OpenSshPtyDeps {
  /** Names the server in errors. */
  name: string;
  /** The ssh client and its environment. */
  ssh: string;
  env: Record<string, string>;
  /** ssh's arguments for a channel on the shared connection, up to (not including) the destination. */
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

const SIGNALS: readonly PtySignal[] = ["SIGINT", "SIGTERM", "SIGKILL", "SIGHUP"];
/** The launcher found no terminal (the server refused the pty-req): nothing was started. */
const NO_PTY_EXIT = 127;

/**
 * Pseudo-terminals over the session's SSH connection, as `ssh -tt` gives them: a channel with a
 * pty-req whose command is a staged launcher, so sshd's own terminal is the program's (no helper
 * needed in the sandbox). The launcher travels first on a plain channel into a 0600 file (neither
 * argv carries the program or its environment), then runs on the terminal: it records its pid (the
 * session leader) and terminal in a 0600 control file, puts the terminal in a sane state with the
 * asked size (a multiplexed client has no local terminal, so its pty-req names neither modes nor
 * size), and runs the program as its child with default signal dispositions, reporting a death by
 * signal n as 128 + n (ssh reports no exit status for it) and removing the control file after.
 * Resize (TIOCSWINSZ on the terminal: the program gets SIGWINCH) and signals to the session's group
 * are one more plain channel each. Closing the channel makes sshd hang the terminal up.
 */
export function openSshPty(deps: OpenSshPtyDeps): PtyTransport {
  return { open: (spec) => open(deps, spec) };
}

async function open(deps: OpenSshPtyDeps, spec: PtySpec): Promise<PtyProcess> {
  const size = checkPtySize(spec);
  if (spec.signal?.aborted) throw new PtyUnavailableError("the PTY open was aborted");
  await deps.connect();
  const closeGraceMs = deps.closeGraceMs ?? 1_000;
  const id = randomBytes(12).toString("hex");
  const base = `\${TMPDIR:-/tmp}/.paperclip-pty.${id}`;
  const launcher = `"${base}.sh"`;
  const ctl = `"${base}"`;

  const program = [
    // Named once: the program's environment may set TMPDIR.
    `__pc_ctl=${ctl}`,
    `rm -f -- ${launcher}`,
    `[ -t 0 ] && [ -t 1 ] || { echo "paperclip: ${deps.name} gave the session no pseudo-terminal" >&2; exit ${NO_PTY_EXIT}; }`,
    `(umask 077; printf '%s %s\\n' "$$" "$(tty)" >"$__pc_ctl")`,
    `stty sane 2>/dev/null; stty cols ${size.cols} rows ${size.rows} 2>/dev/null`,
    spec.cwd === undefined ? "" : `cd ${shellQuote(spec.cwd)} || { rm -f -- "$__pc_ctl"; exit ${NO_PTY_EXIT}; }`,
    envPrologue(spec.env).trimEnd(),
    // Traps (not ignores): the child starts with default dispositions, this shell outlives it.
    `trap : INT TERM HUP QUIT`,
    `/bin/sh -c ${shellQuote(spec.script)}; __pc_rc=$?`,
    `rm -f -- "$__pc_ctl"`,
    `exit "$__pc_rc"`,
  ]
    .filter((line) => line.length > 0)
    .join("\n");
  // set -C: a file planted at the name is refused, never written through.
  const staged = await deps.control.run(`umask 077; set -C; cat > ${launcher}`, { stdin: program });
  if (staged.exitCode !== 0) throw new PtyUnavailableError(`${deps.name}: could not stage the terminal's program in the sandbox's temporary directory`);

  const child = spawn(deps.ssh, [...deps.channelArgs, "-tt", "-o", "EscapeChar=none", ...deps.target, `exec /bin/sh ${launcher}`], {
    // A multiplexed client sends its TERM with the pty-req.
    env: { ...deps.env, TERM: spec.env?.TERM ?? "dumb" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  let sawOutput = false;
  child.stdout.on("data", (chunk: Buffer) => {
    sawOutput = true;
    spec.onData(chunk);
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text: string) => (stderr = (stderr + text).slice(-4096)));
  child.stdin.on("error", () => undefined);
  let ended = false;
  const exited = new Promise<PtyExit>((resolve) => {
    child.once("error", () => resolve({ exitCode: null, signal: null }));
    // `close`: both output pipes are drained, so every byte went to onData first.
    child.once("close", (code) => resolve(code === null || code === 255 ? { exitCode: null, signal: null } : { exitCode: code, signal: null }));
  }).then((exit) => {
    ended = true;
    spec.signal?.removeEventListener("abort", onAbort);
    return exit;
  });
  const onAbort = () => void close();

  /** One more channel against the control file (waits for it while the terminal is still starting). */
  const control = async (action: string): Promise<void> => {
    const script = [
      `__pc_i=0; while [ ! -s ${ctl} ] && [ "$__pc_i" -lt 100 ]; do sleep 0.05; __pc_i=$((__pc_i + 1)); done`,
      `[ -s ${ctl} ] || exit 0`,
      `read -r __pc_pid __pc_tty < ${ctl} || exit 0`,
      action,
    ].join("\n");
    await deps.control.run(script, {});
  };
  const signalGroup = (signal: PtySignal) =>
    control(`kill -${signal.slice(3)} "-$__pc_pid" 2>/dev/null || kill -${signal.slice(3)} "$__pc_pid" 2>/dev/null; exit 0`);

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      if (!ended) {
        // As a terminal that goes away: a hang-up to the session, then SIGKILL to what is left.
        await signalGroup("SIGHUP").catch(() => undefined);
        const gone = await Promise.race([exited.then(() => true), delay(closeGraceMs).then(() => false)]);
        if (!gone) await signalGroup("SIGKILL").catch(() => undefined);
        const last = await Promise.race([exited.then(() => true), delay(closeGraceMs).then(() => false)]);
        // The channel closes with the client: sshd hangs up whatever is still on the terminal.
        if (!last) child.kill("SIGKILL");
      }
      child.stdin.destroy();
      await exited;
    })();
    return closing;
  };
  spec.signal?.addEventListener("abort", onAbort, { once: true });

  // The open answers once the terminal exists or the program has already gone: a server that gives
  // no terminal is an error of the open, not a program that exits at once.
  const ready = await Promise.race([control("exit 0").then(() => "ready" as const), exited.then(() => "ended" as const)]);
  if (ready === "ended" && !sawOutput) {
    const exit = await exited;
    if (exit.exitCode === NO_PTY_EXIT || exit.exitCode === null) {
      await deps.control.run(`rm -f -- ${launcher}`, {}).catch(() => undefined);
      const why = stderr.trim();
      throw new PtyUnavailableError(why.length > 0 ? why : `${deps.name}: the session could not open a pseudo-terminal`);
    }
  }

  let writes: Promise<void> = Promise.resolve();
  return {
    exited,
    write(bytes) {
      const next = writes.then(async () => {
        if (ended || child.stdin.destroyed || bytes.length === 0) return;
        if (!child.stdin.write(bytes)) await new Promise<void>((resolve) => {
          const done = () => {
            child.stdin.off("drain", done);
            child.stdin.off("close", done);
            resolve();
          };
          child.stdin.once("drain", done);
          child.stdin.once("close", done);
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
      if (!SIGNALS.includes(signal)) throw new RangeError(`PTY signal must be one of ${SIGNALS.join(", ")}`);
      if (ended) return;
      await signalGroup(signal);
    },
    close,
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}
