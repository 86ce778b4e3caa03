import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { abortedExit, shellQuote, type ScriptExit, type ScriptIo, type ScriptRunner } from "@paperclip-sandbox/kit";
import type { CloudflareConfig } from "./config.js";
import { openBridgeTerminal } from "./terminal.js";

/** The bridge's terminal route takes a command line up to this long; a longer script is staged first. */
const MAX_TERMINAL_COMMAND_BYTES = 4096;
/** Output lines carry no geometry in raw mode; any size will do. */
const SIZE = { cols: 80, rows: 24 };

/**
 * The command channel's carrier (`withCommandChannel`'s `carrier`): the multiplexer's one long exec
 * on the bridge's terminal WebSocket instead of a streamed process, whose stdin costs one bridge
 * request per write. The terminal is put in raw mode first (`stty raw -echo`: no echo, no CR/LF
 * mapping, no signal keys, no line limit), so the channel's lines (ASCII requests, raw output) cross
 * it unchanged; the terminal's own variables are dropped (`TERM`, and the container's
 * `PROMPT_COMMAND`) so commands get a fresh exec's environment; the multiplexer's stderr goes to
 * /dev/null (the terminal would merge it into the replies). Its commands run in sessions of their
 * own, with no controlling terminal. Without stty it says so as the channel's `H 0` (no channel
 * for the lease: every command stays a streamed process).
 *
 * `io.stdin` is streamed as binary frames; its end closes the socket (a raw terminal has no EOF),
 * and the bridge then ends what runs there. Output is live on `io.stdout`; the exit status is the
 * bridge's exit frame. A script too long for the route's command line (the channel's bootstrap
 * is) is first written to a self-deleting file by one `stage` call.
 */
export function terminalCarrier(config: CloudflareConfig, providerLeaseId: string, stage: ScriptRunner): ScriptRunner {
  return {
    capabilities: Object.freeze({ ...stage.capabilities, stdin: "stream" as const, stdinEof: false, liveOutput: true, separateStderr: false, signals: "none" as const, remoteTimeout: false }),
    async run(script: string, io: ScriptIo): Promise<ScriptExit> {
      if (io.signal?.aborted) return abortedExit();
      const raw = "stty raw -echo 2>/dev/null || { printf 'H 0 %s\\n' 'no stty here to make the terminal raw'; exit 0; }; unset TERM PROMPT_COMMAND; exec";
      let command = `${raw} /bin/sh -c ${shellQuote(script)} 2>/dev/null`;
      if (Buffer.byteLength(command, "utf8") > MAX_TERMINAL_COMMAND_BYTES) {
        const path = `/tmp/.paperclip-cc-${randomBytes(12).toString("hex")}`;
        const staged = await stage.run(`umask 077 && cat > ${shellQuote(path)}`, { stdin: `rm -f -- "$0"\n${script}\n`, ...(io.signal ? { signal: io.signal } : {}) });
        if (staged.exitCode !== 0) throw new Error(`could not stage the terminal's script (${staged.exitCode ?? staged.signal ?? staged.reason})`);
        command = `${raw} /bin/sh ${shellQuote(path)} 2>/dev/null`;
      }
      const deliver = (bytes: Buffer) => {
        if (typeof io.stdout === "function") io.stdout(bytes);
        else io.stdout?.write(bytes);
      };
      const terminal = await openBridgeTerminal(config, providerLeaseId, command, SIZE, deliver);
      let aborted = false;
      const onAbort = () => {
        aborted = true;
        terminal.close();
      };
      // Aborted while it opened (or was staged): it closes at once.
      if (io.signal?.aborted) onAbort();
      else io.signal?.addEventListener("abort", onAbort, { once: true });
      void (async () => {
        const stdin = io.stdin;
        if (stdin === undefined || stdin === null) return;
        if (stdin instanceof Readable) for await (const chunk of stdin) await terminal.write(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : (chunk as Buffer));
        else await terminal.write(Buffer.isBuffer(stdin) ? stdin : Buffer.from(stdin, "utf8"));
        // The end of input: a raw terminal has none but the socket's close.
        terminal.close();
      })().catch(() => terminal.close());
      try {
        const end = await terminal.ended;
        if (aborted || io.signal?.aborted) return abortedExit();
        if (end.exitCode === null) throw new Error(`the terminal ended without an exit status${end.detail ? `: ${end.detail}` : ""}`);
        return { exitCode: end.exitCode, signal: null, reason: "exit" };
      } finally {
        io.signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}
