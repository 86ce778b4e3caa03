import { randomBytes } from "node:crypto";
import { shellQuote } from "../exec/quote.js";
import { abortedExit, type ScriptExit, type ScriptRunner } from "../transport.js";

export interface RemoteGroupKillOptions {
  /** Sandbox directory for the pid files (default `${TMPDIR:-/tmp}`). */
  pidDir?: string;
  /** How long the killer waits for the pid file of a script that has only just started. */
  pidFileWaitMs?: number;
  /**
   * Carries the kill call (default `inner`): a transport that limits concurrent commands gives one
   * outside the limit, so a kill never waits behind the commands it is meant to end.
   */
  killRunner?: ScriptRunner;
}

/**
 * Gives a transport whose abort cannot reach the remote process group (an exec API that signals one
 * pid, or nothing) the full "abort ends the whole group" contract: the script runs as a job in a
 * session of its own (`setsid`) under a wrapper that writes the group id to a pid file, and an
 * abort (or a deadline the vendor enforced on the wrapper alone) ends that group from a second call
 * (SIGTERM, then SIGKILL after the grace). The first call then returns as the group dies. Costs one
 * extra call only when a command is aborted or times out.
 */
export function withRemoteGroupKill(inner: ScriptRunner, opts: RemoteGroupKillOptions = {}): ScriptRunner {
  const dir = opts.pidDir === undefined ? `"\${TMPDIR:-/tmp}"` : shellQuote(opts.pidDir);
  const waitTenths = Math.max(1, Math.ceil((opts.pidFileWaitMs ?? 5_000) / 100));
  return {
    capabilities: Object.freeze({ ...inner.capabilities, signals: "group" as const }),
    async run(script, io) {
      const nonce = randomBytes(12).toString("hex");
      const pidFile = `${dir}/.paperclip-pg.${nonce}`;
      // The job becomes a session (and process group) leader of its own with `setsid`: a background
      // job of a shell without job control is never a group leader, so setsid does not fork and the
      // job's pid is the group id. Without setsid (a minimal image) only the job's pid can be ended.
      // The script is written once (vendors with an argv limit count every byte of it).
      const job = `/bin/sh -c '(umask 077; echo $$ >"$1"); exec /bin/sh -c "$2"' sh "$__pc_pg" "$__pc_rgk_script" <&3 3<&- &`;
      // With a remote deadline the vendor ends the wrapper, not the job's own session: a watchdog
      // in a session of its own ends the job's group a moment later, even with no worker left.
      const deadlineSeconds = inner.capabilities.remoteTimeout && io.timeoutMs ? Math.ceil(io.timeoutMs / 1000) + 1 : undefined;
      const watchdog =
        deadlineSeconds === undefined
          ? []
          : [
              `if command -v setsid >/dev/null 2>&1; then setsid /bin/sh -c 'sleep "$2"; kill -TERM "-$1" 2>/dev/null; sleep 1; kill -KILL "-$1" 2>/dev/null' sh "$__pc_job" ${deadlineSeconds} </dev/null >/dev/null 2>&1 & __pc_wd=$!; fi`,
            ];
      const wrapped = [
        `__pc_pg=${pidFile}`,
        `__pc_rgk_script=${shellQuote(script)}`,
        `__pc_wd=`,
        // An asynchronous list reads /dev/null unless told otherwise: hand it this stdin explicitly.
        `exec 3<&0`,
        `if command -v setsid >/dev/null 2>&1; then setsid ${job} else ${job} fi`,
        `__pc_job=$!`,
        `exec 3<&-`,
        ...watchdog,
        `wait "$__pc_job"; __pc_rc=$?`,
        `[ -z "$__pc_wd" ] || kill -TERM "-$__pc_wd" 2>/dev/null`,
        `rm -f -- "$__pc_pg"`,
        `exit "$__pc_rc"`,
      ].join("\n");
      const killer = (graceMs: number) =>
        [
          `__pc_pg=${pidFile}; __pc_i=0`,
          `while [ ! -s "$__pc_pg" ] && [ "$__pc_i" -lt ${waitTenths} ]; do sleep 0.1; __pc_i=$((__pc_i + 1)); done`,
          `[ -s "$__pc_pg" ] || exit 0`,
          `__pc_g=$(cat "$__pc_pg")`,
          // The group when the job leads one, else just its pid.
          // (`kill -SIG -PGID` without `--`: dash's kill refuses `--`.)
          `__pc_t="-$__pc_g"; kill -0 "$__pc_t" 2>/dev/null || __pc_t="$__pc_g"`,
          `kill -TERM "$__pc_t" 2>/dev/null || exit 0`,
          `__pc_i=0; while kill -0 "$__pc_t" 2>/dev/null && [ "$__pc_i" -lt ${Math.max(1, Math.ceil(graceMs / 50))} ]; do sleep 0.05; __pc_i=$((__pc_i + 1)); done`,
          `kill -KILL "$__pc_t" 2>/dev/null; exit 0`,
        ].join("\n");

      let aborted = false;
      let killing: Promise<unknown> | undefined;
      const onAbort = () => {
        aborted = true;
        killing ??= (opts.killRunner ?? inner).run(killer(io.killGraceMs ?? 250), {}).catch(() => undefined);
      };
      if (io.signal?.aborted) return abortedExit();
      io.signal?.addEventListener("abort", onAbort, { once: true });
      try {
        // The inner run is not given the signal: it could only cut the connection, not the group.
        const { signal: _ignored, ...rest } = io;
        const exit: ScriptExit = await inner.run(wrapped, rest);
        // A vendor's deadline ended only the wrapper: end the job's group now (the watchdog is
        // for a worker that is gone by then).
        if (!aborted && exit.reason === "timeout") killing ??= inner.run(killer(io.killGraceMs ?? 250), {}).catch(() => undefined);
        await killing;
        if (!aborted) return exit;
        return abortedExit(exit.signal ?? "SIGTERM", exit.pid);
      } finally {
        io.signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}
