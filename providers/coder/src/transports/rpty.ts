/**
 * The `rpty` transport: the agent's reconnecting PTY (`/api/v2/workspaceagents/<id>/pty`, a
 * WebSocket authenticated by the `coder_session_token` cookie). A terminal merges stdout and
 * stderr, turns `\n` into `\r\n`, echoes what is typed and reports no exit status, so each command
 * runs under the kit's stdio mux (stdout, stderr and the status come back base64 between per-call
 * markers); an abort ends the group from a second call (closing the socket leaves a reconnecting
 * PTY running). Files travel typed into a raw-mode terminal (`head -c N | base64 -d`) and printed
 * back base64, so stdin above the inline limit and sync need no runner app.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import {
  apiErrorFromUpgradeRefusal,
  createFileStdioRunner,
  launchedPty,
  ProviderApiError,
  shellQuote,
  withRemoteGroupKill,
  type FileTransport,
  type PtySize,
  type PtyTransport,
  type ScriptRunner,
  type TerminalChannel,
} from "@paperclip-sandbox/kit";
import WebSocket from "ws";
import { coderErrorFields } from "../coder-api.js";

export interface PtyTarget {
  coderUrl: string;
  token: string;
  agentId: string;
}

/** Stdin up to this rides inside the command (the command travels in the URL's query). */
const RPTY_INLINE_STDIN = 32 * 1024;
/** The longest command we put in a URL (Go's server allows 1 MB of request head). */
const RPTY_MAX_COMMAND = 512 * 1024;
/** Largest file one upload spools and types. */
const RPTY_MAX_UPLOAD = 256 * 1024 * 1024;
const TYPE_PIECE = 64 * 1024;

interface PtySession {
  /** Resolves with everything the terminal printed once the command ended (the socket closed). */
  output: Promise<Buffer>;
  /** Types text into the terminal. */
  type(text: string): Promise<void>;
  /** Resolves when `marker` has appeared in the output. */
  seen(marker: string): Promise<void>;
  close(): void;
}

function ptyUrl(target: PtyTarget, command: string, size: PtySize): URL {
  const url = new URL(`${target.coderUrl}/api/v2/workspaceagents/${encodeURIComponent(target.agentId)}/pty`.replace(/^http/, "ws"));
  url.searchParams.set("reconnect", randomUUID());
  url.searchParams.set("width", String(size.cols));
  url.searchParams.set("height", String(size.rows));
  url.searchParams.set("command", command);
  return url;
}

function openPty(target: PtyTarget, command: string, signal?: AbortSignal): PtySession {
  const url = ptyUrl(target, command, { cols: 512, rows: 80 });
  const socket = new WebSocket(url, { headers: { cookie: `coder_session_token=${target.token}` }, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  const chunks: Buffer[] = [];
  let text = "";
  const waiters: Array<{ marker: string; resolve(): void }> = [];
  let opened: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  const output = new Promise<Buffer>((resolve, reject) => {
    const onAbort = () => socket.terminate();
    signal?.addEventListener("abort", onAbort, { once: true });
    socket.on("open", () => opened());
    socket.on("message", (data: Buffer) => {
      chunks.push(data);
      if (waiters.length > 0) {
        text = (text + data.toString("latin1")).slice(-4096);
        for (const waiter of [...waiters]) {
          if (text.includes(waiter.marker)) {
            waiters.splice(waiters.indexOf(waiter), 1);
            waiter.resolve();
          }
        }
      }
    });
    socket.on("unexpected-response", (_request, response) => refusal(target, response, reject));
    socket.on("error", (error) =>
      reject(new ProviderApiError({ vendor: "coder", operation: "agentPty", status: 0, code: "network", detail: error.message, retryable: true, gone: false, mayHaveTakenEffect: true })),
    );
    socket.on("close", (code) => {
      signal?.removeEventListener("abort", onAbort);
      if (signal?.aborted)
        reject(new ProviderApiError({ vendor: "coder", operation: "agentPty", status: 0, code: "aborted", detail: "aborted", retryable: false, gone: false, mayHaveTakenEffect: true }));
      else if (code === 1000) resolve(Buffer.concat(chunks));
      else
        reject(
          new ProviderApiError({
            vendor: "coder",
            operation: "agentPty",
            status: 0,
            code: "connection_reset",
            detail: `the terminal closed with WebSocket code ${code}`,
            retryable: false,
            gone: false,
            mayHaveTakenEffect: true,
          }),
        );
    });
  });
  output.catch(() => undefined);
  return {
    output,
    async type(data) {
      await open;
      for (let at = 0; at < data.length; at += TYPE_PIECE) {
        const piece = data.slice(at, at + TYPE_PIECE);
        await new Promise<void>((resolve, reject) => socket.send(JSON.stringify({ data: piece }), (error) => (error ? reject(error) : resolve())));
      }
    },
    seen: (marker) =>
      new Promise<void>((resolve, reject) => {
        if (text.includes(marker)) return resolve();
        waiters.push({ marker, resolve });
        output.then(() => reject(new Error(`the terminal closed before printing ${marker}`)), reject);
      }),
    close: () => socket.terminate(),
  };
}

/** The agent refused the WebSocket upgrade: its status and Coder's message. */
function refusal(target: PtyTarget, response: import("node:http").IncomingMessage, reject: (error: Error) => void): void {
  void apiErrorFromUpgradeRefusal(response, { vendor: "coder", operation: "agentPty", extractError: coderErrorFields, secrets: [target.token] }).then(reject);
}

/**
 * Login terminals on the agent's reconnecting PTY (`supportsLoginPty`): a terminal of the asked
 * size (the `width`/`height` query), keystrokes as `{"data"}` frames, a resize as a
 * `{"height","width"}` frame (the agent resizes its PTY: SIGWINCH), the output as binary frames.
 * The agent reports no exit status and keeps a reconnecting PTY running when its socket closes, so
 * the kit's `launchedPty` runs the program (the status left in a file, read back through `control`,
 * the lease's command runner; stop and close signal the session's group from there). Input is
 * text: the protocol carries `data` as a JSON string, so bytes that are not UTF-8 cannot be typed.
 */
export function rptyTerminals(target: PtyTarget, control: ScriptRunner): PtyTransport {
  return launchedPty({
    name: "the Coder workspace",
    control,
    channelExitStatus: false,
    openChannel: (command, size, _term, onData) =>
      new Promise<TerminalChannel>((resolve, reject) => {
        // The agent sets TERM itself (xterm-256color), as for Coder's web terminal.
        const socket = new WebSocket(ptyUrl(target, command, size), { headers: { cookie: `coder_session_token=${target.token}` }, perMessageDeflate: false });
        let settle!: (end: { exitCode: number | null; detail?: string }) => void;
        const ended = new Promise<{ exitCode: number | null; detail?: string }>((done) => (settle = done));
        const send = (frame: object) =>
          new Promise<void>((done, fail) => {
            if (socket.readyState !== socket.OPEN) return done();
            socket.send(JSON.stringify(frame), (error) => (error ? fail(error) : done()));
          });
        socket.on("message", (data: Buffer) => onData(data));
        socket.on("unexpected-response", (_request, response) => refusal(target, response, reject));
        socket.on("error", (error) => {
          reject(new ProviderApiError({ vendor: "coder", operation: "agentPty", status: 0, code: "network", detail: error.message, retryable: true, gone: false, mayHaveTakenEffect: true }));
          settle({ exitCode: null, detail: error.message });
        });
        socket.on("close", (code) => settle({ exitCode: null, ...(code === 1000 ? {} : { detail: `the terminal closed with WebSocket code ${code}` }) }));
        socket.on("open", () =>
          resolve({
            ended,
            write: (bytes) => send({ data: bytes.toString("utf8") }),
            resize: ({ cols, rows }) => send({ height: rows, width: cols }),
            close: () => socket.terminate(),
          }),
        );
      }),
  });
}

/** A terminal prints `\r\n` for every `\n` (ONLCR): undo it, markers and base64 are line-based. */
function terminalText(output: Buffer): string {
  return output.toString("latin1").replace(/\r\n/g, "\n");
}

/** Runs one command in a fresh terminal and returns what it printed, line ends as the command wrote them. */
async function ptyExec(target: PtyTarget, command: string, signal?: AbortSignal): Promise<string> {
  return terminalText(await openPty(target, command, signal).output);
}

/** Uploads and downloads through terminals: no file API needed. */
export function ptyFiles(target: PtyTarget): FileTransport {
  return {
    maxUploadBytes: RPTY_MAX_UPLOAD,
    async upload(path, source, opts = {}) {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of source as AsyncIterable<Buffer | string>) {
        const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
        size += bytes.length;
        if (size > RPTY_MAX_UPLOAD) throw new Error(`upload of ${path}: larger than ${RPTY_MAX_UPLOAD} bytes`);
        chunks.push(bytes);
      }
      const encoded = Buffer.concat(chunks, size).toString("base64");
      const nonce = randomBytes(8).toString("hex");
      const target_ = shellQuote(path);
      const temp = `${path}.paperclip-upload-${nonce}`;
      const mode = opts.mode === undefined ? "" : ` && chmod ${opts.mode.toString(8)} ${shellQuote(temp)}`;
      // Raw mode, no echo: typed bytes reach head unchanged and nothing comes back but the markers.
      const command = [
        `stty raw -echo 2>/dev/null`,
        `printf 'PCUP%s\\n' ${nonce}`,
        `(umask 077; head -c ${encoded.length} | base64 -d > ${shellQuote(temp)}${mode} && mv -f -- ${shellQuote(temp)} ${target_}); __pc_rc=$?`,
        `[ "$__pc_rc" -eq 0 ] || rm -f -- ${shellQuote(temp)}`,
        `printf '\\nPCUPDONE%s:%d\\n' ${nonce} "$__pc_rc"`,
      ].join("; ");
      const session = openPty(target, command, opts.signal);
      await session.seen(`PCUP${nonce}`);
      await session.type(encoded);
      const text = terminalText(await session.output);
      const status = new RegExp(`PCUPDONE${nonce}:(\\d+)`).exec(text);
      if (!status) throw new Error(`upload of ${path}: the terminal closed without reporting the result`);
      if (status[1] !== "0") throw new Error(`upload of ${path} failed in the workspace (exit ${status[1]})`);
    },
    async download(path, opts = {}) {
      const nonce = randomBytes(8).toString("hex");
      const command = `printf '\\nPCDL%s\\n' ${nonce}; base64 -- ${shellQuote(path)}; printf '\\nPCDLEND%s:%d\\n' ${nonce} "$?"`;
      const text = await ptyExec(target, command, opts.signal);
      const start = text.indexOf(`\nPCDL${nonce}\n`);
      const end = new RegExp(`\\nPCDLEND${nonce}:(\\d+)\\n`).exec(text);
      if (start < 0 || !end) throw new Error(`download of ${path}: the terminal closed without reporting the result`);
      if (end[1] !== "0") throw new Error(`download of ${path} failed in the workspace (exit ${end[1]}: missing or unreadable)`);
      const body = text.slice(start + `\nPCDL${nonce}\n`.length, end.index).replace(/\s+/g, "");
      return Readable.from([Buffer.from(body, "base64")]);
    },
  };
}

/** Commands over the terminal: buffered (no live output), binary-safe through the mux, group kill by a second call. */
export function rptyRunner(target: PtyTarget, baseEnv: Record<string, string>): ScriptRunner {
  const files = ptyFiles(target);
  const inner = createFileStdioRunner({
    exec: async (request) => ({ exitCode: null, output: await ptyExec(target, request.command, request.signal) }),
    files,
    inlineStdinBytes: RPTY_INLINE_STDIN,
    maxCommandBytes: RPTY_MAX_COMMAND,
  });
  const runner = withRemoteGroupKill(inner);
  return {
    capabilities: runner.capabilities,
    run: (script, io) => runner.run(script, { ...io, env: { ...baseEnv, ...(io.env ?? {}) } }),
  };
}
