/**
 * The command channel's wire protocol, version 1: ASCII lines both ways, one message a line, fields
 * separated by single spaces, bytes as base64. Lines keep the in-sandbox side simple (a POSIX `sh`
 * can read them with `read -r`) and make a half-written message impossible to mistake for another.
 *
 * Host to sandbox (the multiplexer's stdin):
 *   R <id> <ack> <mode> <timeoutMs> <graceMs> <window> <script b64> [<stdin b64>]
 *        run `sh -c script`; mode n: stdin is /dev/null, i: the inline bytes then EOF, s: I/E follow.
 *        ack: every id up to it is settled on the host (its claim may go). window: output bytes the
 *        sandbox may send before a W (0: unbounded).
 *   I <id> <b64>        stdin bytes (mode s)           E <id>            stdin EOF
 *   K <id> <graceMs>    end the command's group: SIGTERM, SIGKILL after the grace
 *   W <id> <bytes>      output credit                  A <ack>           claims up to ack may go
 * Sandbox to host (its stdout):
 *   H 1 <impl> <pid> <stateDir b64> <features> <version>    ready; H 0 <reason> means unavailable
 *   S <id> <pid>        started (claimed, spawned; pid = process group)
 *   F <id> <why b64>    not started (never ran)
 *   O <id> <b64>        stdout                         X <id> <b64>      stderr
 *   C <id> <bytes>      stdin bytes taken by the command (stdin credit back)
 *   D <id> <code|-> <signal|-> <timedOut 0|1>                 ended, every O/X of it sent before
 */

export const PROTOCOL_VERSION = 1;

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

/** One reply line (without its newline); throws ProtocolError for anything malformed. */
export function parseReply(line: string): Reply {
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
      return { kind: "hello", hello: { implementation: f[2] ?? "?", pid: int(3), stateDir: bytes(4).toString("utf8"), features: (f[5] ?? "").split(",").filter(Boolean), version: f.slice(6).join(" ") } };
    case "S":
      return { kind: "started", id: int(1), pid: int(2) };
    case "F":
      return { kind: "refused", id: int(1), why: bytes(2).toString("utf8") };
    case "O":
      return { kind: "stdout", id: int(1), bytes: bytes(2) };
    case "X":
      return { kind: "stderr", id: int(1), bytes: bytes(2) };
    case "C":
      return { kind: "credit", id: int(1), bytes: int(2) };
    case "D":
      return { kind: "done", id: int(1), exitCode: f[2] === "-" ? null : int(2), signal: f[3] === "-" || f[3] === undefined ? null : f[3], timedOut: f[4] === "1" };
    default:
      throw new ProtocolError(`unknown reply: ${line.slice(0, 80)}`);
  }
}

/** Splits a byte stream into lines (the protocol is ASCII; a partial line waits for its end). */
export class LineSplitter {
  private rest = "";
  constructor(private readonly onLine: (line: string) => void) {}
  push(chunk: Buffer): void {
    let text = this.rest + chunk.toString("latin1");
    let at: number;
    while ((at = text.indexOf("\n")) >= 0) {
      const line = text.slice(0, at);
      text = text.slice(at + 1);
      if (line.length > 0) this.onLine(line);
    }
    this.rest = text;
  }
}
