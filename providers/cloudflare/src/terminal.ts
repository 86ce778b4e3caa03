import { apiErrorFromUpgradeRefusal, launchedPty, ProviderApiError, PtyUnavailableError, type PtySize, type PtyTransport, type ScriptRunner, type TerminalChannel } from "@paperclip-sandbox/kit";
import { WebSocket } from "ws";
import { bridgeErrorFields } from "./bridge-client.js";
import type { CloudflareConfig } from "./config.js";

const API_PREFIX = "/api/paperclip-sandbox/v1";

/** A bridge from upstream's template has no terminal route: every open says what to deploy instead. */
export function noTerminals(): PtyTransport {
  return {
    open: async () => {
      throw new PtyUnavailableError("this bridge has no terminal route (a bridge from upstream's template): deploy the bridge from providers/cloudflare/bridge for login terminals");
    },
  };
}

/**
 * Login terminals through the bridge's `GET /terminal` WebSocket (the SDK's `sandbox.terminal()`
 * behind it): binary frames are the terminal's bytes both ways, `{"type":"resize"}` resizes it, and
 * the bridge reports the command's end as `{"type":"exit","code"}`. The kit's `launchedPty` stages
 * the program (0600, over `control`), runs it as the session's leader and signals its group with
 * control calls. The bearer travels in the upgrade's Authorization header, never in the URL.
 */
export function bridgeTerminals(config: CloudflareConfig, providerLeaseId: string, control: ScriptRunner): PtyTransport {
  return launchedPty({
    name: `Cloudflare sandbox ${providerLeaseId}`,
    control,
    channelExitStatus: true,
    openChannel: (command, size, _term, onData) => openBridgeTerminal(config, providerLeaseId, command, size, onData),
  });
}

/**
 * Opens the bridge's `GET /terminal` WebSocket running `command` (a shell command line) on a
 * pseudo-terminal: `onData` gets the terminal's bytes, `ended` settles with the bridge's exit
 * status (null, with why, when the socket closed without one), `close` drops the socket (the bridge
 * then ends what still runs there).
 */
export function openBridgeTerminal(config: CloudflareConfig, providerLeaseId: string, command: string, size: PtySize, onData: (bytes: Buffer) => void): Promise<TerminalChannel> {
  return new Promise<TerminalChannel>((resolve, reject) => {
    const url = new URL(`${config.bridgeBaseUrl.replace(/\/+$/, "")}${API_PREFIX}/terminal`);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.search = new URLSearchParams({ providerLeaseId, command, cols: String(size.cols), rows: String(size.rows) }).toString();
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${config.bridgeAuthToken}` }, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
    let settle!: (end: { exitCode: number | null; detail?: string }) => void;
    const ended = new Promise<{ exitCode: number | null; detail?: string }>((done) => (settle = done));
    let detail: string | undefined;
    socket.on("message", (data: Buffer, isBinary: boolean) => {
      if (isBinary) return onData(data);
      let frame: { type?: unknown; code?: unknown; message?: unknown };
      try {
        frame = JSON.parse(data.toString("utf8")) as typeof frame;
      } catch {
        return;
      }
      if (frame.type === "exit") settle({ exitCode: typeof frame.code === "number" ? frame.code : null });
      else if (frame.type === "error" && typeof frame.message === "string") detail = frame.message;
    });
    // Refused before it opened: the same error as the bridge's HTTP routes give (its code, `gone`).
    socket.on("unexpected-response", (_request, response) => {
      void apiErrorFromUpgradeRefusal(response, { vendor: "cloudflare", operation: "openTerminal", extractError: bridgeErrorFields, secrets: [config.bridgeAuthToken] }).then((error) => {
        reject(error);
        settle({ exitCode: null, detail: error.message });
      });
    });
    socket.on("error", (error) => {
      reject(new ProviderApiError({ vendor: "cloudflare", operation: "openTerminal", status: 0, code: "network", detail: error.message, retryable: false, gone: false, mayHaveTakenEffect: true }));
      settle({ exitCode: null, detail: error.message });
    });
    socket.on("close", (code, reason) => settle({ exitCode: null, ...(code === 1000 ? {} : { detail: detail ?? (reason.toString("utf8") || `the terminal closed with WebSocket code ${code}`) }) }));
    const send = (data: Buffer | string) =>
      new Promise<void>((done) => {
        if (socket.readyState !== socket.OPEN) return done();
        socket.send(data, { binary: typeof data !== "string" }, () => done());
      });
    socket.on("open", () =>
      resolve({
        ended,
        write: (bytes) => send(bytes),
        resize: ({ cols, rows }) => send(JSON.stringify({ type: "resize", cols, rows })),
        close: () => socket.terminate(),
      }),
    );
  });
}
