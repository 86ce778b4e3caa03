import { describe, expect, it } from "vitest";
import { awaitPtyStart, PtyStartLine } from "./pty-start-line.js";

/** What a terminal shows when the wrapper's shell line runs: the marker line, as `printf` writes it through ONLCR. */
function printed(line: PtyStartLine, pid: number, tty: string): string {
  const marker = /printf '%s:%s:%s:\\n' ([0-9a-f]+) /.exec(line.shellLine)![1]!;
  return `${marker}:${pid}:${tty}:\r\n`;
}

describe("PtyStartLine", () => {
  it("drops everything before the start line (prompt, echo), passes the program's bytes on unchanged, even split anywhere", () => {
    const out: Buffer[] = [];
    const line = new PtyStartLine((bytes) => out.push(bytes));
    const program = Buffer.from("héllo ✓ 😀\r\n", "utf8");
    const stream = Buffer.concat([Buffer.from('user@box:~$  exec /bin/sh -c "$PAPERCLIP_PTY"\r\n'), Buffer.from(printed(line, 4242, "/dev/pts/3")), program]);
    for (let at = 0; at < stream.length; at += 5) line.push(stream.subarray(at, at + 5));
    expect(line.started).toEqual({ pid: 4242, tty: "/dev/pts/3" });
    expect(Buffer.concat(out)).toEqual(program);
  });

  it("the typed line's echo cannot fake the start: the marker is never in what is typed, only in what the wrapper prints", () => {
    const line = new PtyStartLine(() => undefined);
    line.push(Buffer.from(`${line.shellLine}\r\n`));
    expect(line.started).toBeUndefined();
  });

  it("awaitPtyStart says why a terminal never started: the program ended first, or the open was aborted", async () => {
    const ended = new PtyStartLine(() => undefined);
    await expect(awaitPtyStart(ended, Promise.resolve(), { timeoutMs: 60_000 })).resolves.toBe("ended");
    const aborted = new PtyStartLine(() => undefined);
    await expect(awaitPtyStart(aborted, new Promise(() => undefined), { timeoutMs: 60_000, signal: AbortSignal.abort() })).resolves.toBe("aborted");
    const started = new PtyStartLine(() => undefined);
    started.push(Buffer.from(printed(started, 7, "")));
    await expect(awaitPtyStart(started, new Promise(() => undefined), { timeoutMs: 60_000 })).resolves.toBe("started");
    expect(started.started).toEqual({ pid: 7, tty: "" });
  });
});
