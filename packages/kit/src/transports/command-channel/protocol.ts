/**
 * The command channel's wire protocol, version 1: ASCII lines both ways, one message a line, fields
 * separated by single spaces; bytes as base64 towards the sandbox, and raw after a header line for
 * a command's output (the bulk of the traffic, a quarter less than base64 and no encoding work).
 *
 * Host to sandbox (the multiplexer's stdin):
 *   R <id> <ack> <mode> <timeoutMs> <graceMs> <window> <script b64> [<stdin b64>]
 *        run `sh -c script`; mode n: stdin is /dev/null, i: the inline bytes then EOF, s: I/E follow.
 *        ack: every id up to it is settled on the host (its claim may go). window: output bytes the
 *        sandbox may send before a W (0: unbounded). The host grants credit once output is taken,
 *        so a vendor that buffers a slow stream never holds more than a window per command.
 *   I <id> <b64>        stdin bytes (mode s)           E <id>            stdin EOF
 *   K <id> <graceMs>    end the command's group: SIGTERM, SIGKILL after the grace
 *   W <id> <bytes>      output credit                  A <ack>           claims up to ack may go
 *   Q                   quit once no command runs (as stdin's end does; for a carrier without EOF)
 * Sandbox to host (its stdout):
 *   H 1 <impl> <pid> <stateDir b64> <features> <version>    ready; H 0 <reason> means unavailable
 *   S <id> <pid>        started (claimed, spawned; pid = process group)
 *   F <id> <why b64>    not started (never ran)
 *   O <id> <n>\n<n bytes>  stdout                    X <id> <n>\n<n bytes>  stderr
 *   C <id> <bytes>      stdin bytes taken by the command (stdin credit back)
 *   D <id> <code|-> <signal|-> <timedOut 0|1>                 ended, every O/X of it sent before
 */

const PROTOCOL_VERSION = 1;

export type StdinMode = "n" | "i" | "s";

export interface RunRequest {
  id: number;
  ack: number;
  mode: StdinMode;
  timeoutMs: number;
  graceMs: number;
  window: number;
  script: Buffer;
  inline?: Buffer;
}

export function runLine(r: RunRequest): string {
  const fields = ["R", r.id, r.ack, r.mode, Math.max(0, Math.round(r.timeoutMs)), Math.max(0, Math.round(r.graceMs)), r.window, r.script.toString("base64")];
  if (r.mode === "i") fields.push((r.inline ?? Buffer.alloc(0)).toString("base64"));
  return `${fields.join(" ")}\n`;
}

export const stdinLine = (id: number, bytes: Buffer): string => `I ${id} ${bytes.toString("base64")}\n`;
export const eofLine = (id: number): string => `E ${id}\n`;
export const killLine = (id: number, graceMs: number): string => `K ${id} ${Math.max(1, Math.round(graceMs))}\n`;
export const creditLine = (id: number, bytes: number): string => `W ${id} ${bytes}\n`;
export const ackLine = (ack: number): string => `A ${ack}\n`;
/** Quit once no command runs: the end of input for a carrier that cannot send EOF (a raw terminal). */
export const quitLine = (): string => "Q\n";

export interface Hello {
  implementation: string;
  pid: number;
  stateDir: string;
  features: string[];
  version: string;
}

export type Reply =
  | { kind: "hello"; hello: Hello }
  | { kind: "unavailable"; reason: string }
  | { kind: "started"; id: number; pid: number }
  | { kind: "refused"; id: number; why: string }
  | { kind: "stdout" | "stderr"; id: number; bytes: Buffer }
  | { kind: "credit"; id: number; bytes: number }
  | { kind: "done"; id: number; exitCode: number | null; signal: string | null; timedOut: boolean };

const INTEGER = /^(0|[1-9][0-9]{0,15})$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

/** The length of the raw payload that follows an output header line (`O`/`X`), else undefined. */
function payloadLength(line: string): number | undefined {
  const f = line.split(" ");
  if ((f[0] !== "O" && f[0] !== "X") || f.length !== 3 || !INTEGER.test(f[2]!)) return undefined;
  const length = Number(f[2]);
  if (length > MAX_PAYLOAD_BYTES) throw new ProtocolError(`an output frame of ${length} bytes (at most ${MAX_PAYLOAD_BYTES})`);
  return length;
}

/** One reply line (without its newline), with the raw payload that followed it; throws ProtocolError for anything malformed. */
export function parseReply(line: string, payload?: Buffer): Reply {
  const f = line.split(" ");
  const int = (i: number): number => {
    const v = f[i];
    if (v === undefined || !INTEGER.test(v)) throw new ProtocolError(`field ${i} of a ${f[0]} reply is not a number: ${line.slice(0, 80)}`);
    return Number(v);
  };
  const bytes = (i: number): Buffer => {
    const v = f[i] ?? "";
    if (!BASE64.test(v)) throw new ProtocolError(`field ${i} of a ${f[0]} reply is not base64`);
    return Buffer.from(v, "base64");
  };
  switch (f[0]) {
    case "H":
      if (f[1] === "0") return { kind: "unavailable", reason: f.slice(2).join(" ") };
      if (f[1] !== String(PROTOCOL_VERSION)) throw new ProtocolError(`the channel speaks protocol ${f[1]}, not ${PROTOCOL_VERSION}`);
      return {
        kind: "hello",
        hello: { implementation: f[2] ?? "?", pid: int(3), stateDir: bytes(4).toString("utf8"), features: (f[5] ?? "").split(",").filter(Boolean), version: f.slice(6).join(" ") },
      };
    case "S":
      return { kind: "started", id: int(1), pid: int(2) };
    case "F":
      return { kind: "refused", id: int(1), why: bytes(2).toString("utf8") };
    case "O":
    case "X":
      if (!payload) throw new ProtocolError(`a ${f[0]} reply without its bytes`);
      return { kind: f[0] === "O" ? "stdout" : "stderr", id: int(1), bytes: payload };
    case "C":
      return { kind: "credit", id: int(1), bytes: int(2) };
    case "D":
      return { kind: "done", id: int(1), exitCode: f[2] === "-" ? null : int(2), signal: f[3] === "-" || f[3] === undefined ? null : f[3], timedOut: f[4] === "1" };
    default:
      throw new ProtocolError(`unknown reply: ${line.slice(0, 80)}`);
  }
}

/** Largest output frame the host accepts (the multiplexer sends what one pipe read gave it). */
const MAX_PAYLOAD_BYTES = 16 * 1024 * 1024;
/** A reply line longer than this is not the protocol. */
const MAX_LINE_BYTES = 64 * 1024 * 1024;

/**
 * Splits the multiplexer's stdout into replies: ASCII lines, each output header line followed by
 * its raw payload. A partial line or payload waits for the rest.
 */
export class ReplyReader {
  private line: Buffer[] = [];
  private lineBytes = 0;
  private head: string | undefined;
  private payload: Buffer[] = [];
  private missing = 0;

  constructor(private readonly onReply: (line: string, payload?: Buffer) => void) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.head !== undefined) {
        const take = Math.min(this.missing, chunk.length - at);
        this.payload.push(chunk.subarray(at, at + take));
        this.missing -= take;
        at += take;
        if (this.missing === 0) {
          const head = this.head;
          const payload = Buffer.concat(this.payload);
          this.head = undefined;
          this.payload = [];
          this.onReply(head, payload);
        }
        continue;
      }
      const end = chunk.indexOf(0x0a, at);
      if (end < 0) {
        this.line.push(chunk.subarray(at));
        this.lineBytes += chunk.length - at;
        if (this.lineBytes > MAX_LINE_BYTES) throw new ProtocolError("a reply line is longer than the protocol allows");
        return;
      }
      this.line.push(chunk.subarray(at, end));
      const line = Buffer.concat(this.line).toString("latin1");
      this.line = [];
      this.lineBytes = 0;
      at = end + 1;
      if (line.length === 0) continue;
      const length = payloadLength(line);
      if (length === undefined) this.onReply(line);
      else if (length === 0) this.onReply(line, Buffer.alloc(0));
      else {
        this.head = line;
        this.missing = length;
      }
    }
  }
}
