import type { PtyExit, PtyProcess, PtySignal, PtyTransport } from "../../transport.js";
import { checkPtySize } from "../../transports/script-pty.js";
import { envdApiError } from "./errors.js";
import { envdExitOf } from "./process-api.js";
import { ENVD_SIGNAL, processRpcOf, type EnvdProcessEvent, type EnvdSandboxLike } from "./sdk-shapes.js";

export interface EnvdPtyOptions {
  vendor: string;
  /** How long the start event and each unary call may take. */
  requestTimeoutMs: number;
  /** Keepalive events while the terminal is silent (seconds; the SDK's PTY uses 50). */
  keepaliveSeconds?: number;
  /** Grace between SIGTERM and SIGKILL when a terminal is closed with its program running. Default 1000 ms. */
  closeGraceMs?: number;
}

/**
 * envd's own pseudo-terminals (what the SDKs' `sandbox.pty` drives): `process.Start` with `pty`
 * runs `sh -c script` as the leader of a session on a terminal of that size (envd's
 * `pty.StartWithSize`), its output comes back as `pty` data events, input goes with `SendInput`
 * `pty`, a resize with `Update`. No Connect deadline is set, so envd does not kill the program at a
 * call timeout (the SDK's own 60 s default would end a login); keepalive events hold idle proxies.
 * envd signals only SIGTERM and SIGKILL: SIGINT and SIGHUP are sent as SIGTERM.
 */
export function envdPty(sandbox: EnvdSandboxLike, options: EnvdPtyOptions): PtyTransport {
  const rpc = processRpcOf(sandbox);
  const vendor = options.vendor;
  const update = rpc.update;
  const callTimeout = () => AbortSignal.timeout(options.requestTimeoutMs);
  const closeGraceMs = options.closeGraceMs ?? 1_000;
  const after = (ms: number) => new Promise<false>((resolve) => setTimeout(() => resolve(false), ms).unref?.());

  return {
    async open(spec) {
      const size = checkPtySize(spec);
      if (typeof update !== "function") throw new TypeError("this SDK's envd process client has no update (PTY resize): the pinned SDK version is required");
      const connection = new AbortController();
      const onAbort = () => connection.abort(spec.signal?.reason);
      spec.signal?.addEventListener("abort", onAbort, { once: true });
      const startTimer = setTimeout(() => connection.abort(new Error(`no start event within ${options.requestTimeoutMs} ms`)), options.requestTimeoutMs);
      const events = rpc.start(
        { process: { cmd: "/bin/sh", args: ["-c", spec.script], envs: spec.env ?? {}, ...(spec.cwd ? { cwd: spec.cwd } : {}) }, pty: { size } },
        { signal: connection.signal, headers: { "Keepalive-Ping-Interval": String(options.keepaliveSeconds ?? 50) } },
      );
      const iterator = events[Symbol.asyncIterator]();
      let first: IteratorResult<EnvdProcessEvent>;
      try {
        first = await iterator.next();
      } catch (error) {
        spec.signal?.removeEventListener("abort", onAbort);
        throw envdApiError(vendor, "process.Start", error, { beforeStart: true });
      } finally {
        clearTimeout(startTimer);
      }
      const event = first.done ? undefined : first.value.event?.event;
      if (event?.case !== "start") {
        connection.abort();
        spec.signal?.removeEventListener("abort", onAbort);
        throw envdApiError(vendor, "process.Start", new Error("the PTY process stream did not begin with a start event"));
      }
      const selector = { selector: { case: "pid" as const, value: event.value.pid } };
      let ended = false;

      const exited: Promise<PtyExit> = (async (): Promise<PtyExit> => {
        try {
          for (;;) {
            const next = await iterator.next();
            if (next.done) return { exitCode: null, signal: null };
            const e = next.value.event?.event;
            if (e?.case === "data" && e.value.output.case === "pty") {
              const out = e.value.output.value;
              spec.onData(Buffer.from(out.buffer, out.byteOffset, out.byteLength));
            } else if (e?.case === "end") {
              const exit = envdExitOf(e.value);
              return { exitCode: exit.exitCode, signal: exit.signal };
            }
          }
        } catch {
          return { exitCode: null, signal: null };
        } finally {
          ended = true;
          spec.signal?.removeEventListener("abort", onAbort);
        }
      })();

      const unary = async (operation: string, call: () => Promise<unknown>) => {
        try {
          await call();
        } catch (error) {
          throw envdApiError(vendor, operation, error);
        }
      };
      let writes: Promise<void> = Promise.resolve();
      const signal = (sig: PtySignal) =>
        unary("process.SendSignal", () => rpc.sendSignal({ process: selector, signal: sig === "SIGKILL" ? ENVD_SIGNAL.SIGKILL : ENVD_SIGNAL.SIGTERM }, { signal: callTimeout() }));
      let closing: Promise<void> | undefined;

      const process: PtyProcess = {
        exited,
        write(bytes) {
          const next = writes.then(() =>
            ended || bytes.length === 0
              ? undefined
              : unary("process.SendInput", () => rpc.sendInput({ process: selector, input: { input: { case: "pty", value: new Uint8Array(bytes) } } }, { signal: callTimeout() })),
          );
          writes = next.catch(() => undefined);
          return next;
        },
        async resize(next) {
          const checked = checkPtySize(next);
          if (ended) return;
          await unary("process.Update", () => update.call(rpc, { process: selector, pty: { size: checked } }, { signal: callTimeout() }));
        },
        async kill(sig = "SIGTERM") {
          if (ended) return;
          await signal(sig);
        },
        close() {
          closing ??= (async () => {
            if (!ended) {
              await signal("SIGTERM").catch(() => undefined);
              const gone = await Promise.race([exited.then(() => true), after(closeGraceMs)]);
              if (!gone) await signal("SIGKILL").catch(() => undefined);
              const last = await Promise.race([exited.then(() => true), after(closeGraceMs)]);
              if (!last) connection.abort();
            }
            await exited;
          })();
          return closing;
        },
      };
      return process;
    },
  };
}
