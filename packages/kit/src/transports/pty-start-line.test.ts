import { describe, expect, it } from "vitest";
import { STREAM_TRANSPORT, type PtyExit, type ScriptRunner } from "../transport.js";
import { awaitPtyStart, PtyStartLine, startLinePty, type StartLineTerminal } from "./pty-start-line.js";

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

/** A vendor terminal in memory: what it was sent, and a program whose end the test decides. */
function fakeTerminal(options: { forceEnd?: boolean; failWrites?: boolean } = {}) {
  let end!: (exit: PtyExit) => void;
  const exited = new Promise<PtyExit>((resolve) => (end = resolve));
  const events: string[] = [];
  const terminal: StartLineTerminal = {
    exited,
    write: async (bytes) => {
      if (options.failWrites) throw new Error("socket closed");
      events.push(`write ${bytes.toString()}`);
    },
    ...(options.forceEnd ? { forceEnd: async () => void events.push("forceEnd") } : {}),
    dispose: () => void events.push("dispose"),
  };
  return { terminal, events, end };
}

function recordingRunner(calls: string[], onRun?: (script: string) => void): ScriptRunner {
  return {
    capabilities: STREAM_TRANSPORT,
    run: async (script) => {
      calls.push(script);
      onRun?.(script);
      return { exitCode: 0, signal: null, reason: "exit" };
    },
  };
}

describe("startLinePty", () => {
  it("a wrapper that ends before its start line fails the open, naming what ran it and what it printed; the terminal is ended and dropped", async () => {
    const fake = fakeTerminal({ forceEnd: true });
    const pty = startLinePty({
      runner: recordingRunner([]),
      launcher: "the sandbox's login shell",
      launch: async (_spec, _size, line) => {
        line.push(Buffer.from("\x1b[1mbash: /bin/sh: not found\x1b[0m\r\n"));
        fake.end({ exitCode: 127, signal: null });
        return fake.terminal;
      },
    });
    await expect(pty.open({ script: "true", cols: 80, rows: 24, onData: () => undefined })).rejects.toThrow("the sandbox's login shell ended before the program started: bash: /bin/sh: not found");
    expect(fake.events).toEqual(["forceEnd", "dispose"]);
  });

  it("refuses a size above the vendor's bound before opening anything", async () => {
    let launched = false;
    const pty = startLinePty({
      runner: recordingRunner([]),
      launcher: "x",
      maxSize: { dimension: 999, vendor: "Daytona" },
      launch: async () => {
        launched = true;
        return fakeTerminal().terminal;
      },
    });
    await expect(pty.open({ script: "true", cols: 1000, rows: 24, onData: () => undefined })).rejects.toThrow("Daytona terminals are at most 999 columns and rows (got 1000x24)");
    expect(launched).toBe(false);
  });

  it("after the start: signals go to the program's group through the runner, SIGKILL to the vendor's hard end, resizes through the runner at its terminal; writes keep their order and stop once it ended", async () => {
    const calls: string[] = [];
    const fake = fakeTerminal({ forceEnd: true });
    const out: string[] = [];
    const pty = startLinePty({
      runner: recordingRunner(calls),
      launcher: "x",
      launch: async (_spec, _size, line) => {
        line.push(Buffer.from(`${printed(line, 4242, "/dev/pts/7")}hello`));
        return fake.terminal;
      },
    });
    const terminal = await pty.open({ script: "true", cols: 80, rows: 24, onData: (bytes) => out.push(bytes.toString()) });
    expect(out).toEqual(["hello"]);
    await Promise.all([terminal.write(Buffer.from("a")), terminal.write(Buffer.from("b"))]);
    await terminal.kill("SIGINT");
    await terminal.resize({ cols: 100, rows: 30 });
    await terminal.kill("SIGKILL");
    expect(calls[0]).toBe("kill -INT -4242 2>/dev/null || kill -INT 4242 2>/dev/null; exit 0");
    expect(calls[1]).toContain("__pc_tty='/dev/pts/7'");
    expect(calls[1]).toContain("rows 30 cols 100");
    expect(fake.events).toEqual(["write a", "write b", "forceEnd"]);
    fake.end({ exitCode: 137, signal: null });
    await terminal.exited;
    await terminal.write(Buffer.from("late"));
    await terminal.close();
    expect(fake.events).toEqual(["write a", "write b", "forceEnd", "dispose"]);
  });

  it("close hangs up the program's group, then the hard end when it ignores the hang-up; a failed write is the vendor's error", async () => {
    const calls: string[] = [];
    const fake = fakeTerminal({ failWrites: true });
    const pty = startLinePty({
      runner: recordingRunner(calls, (script) => {
        if (script.startsWith("kill -KILL")) fake.end({ exitCode: null, signal: null });
      }),
      launcher: "x",
      writeError: (error) => new Error(`vendor: ${(error as Error).message}`),
      closeGraceMs: 10,
      launch: async (_spec, _size, line) => {
        line.push(Buffer.from(printed(line, 77, "/dev/pts/1")));
        return fake.terminal;
      },
    });
    const terminal = await pty.open({ script: "true", cols: 80, rows: 24, onData: () => undefined });
    await expect(terminal.write(Buffer.from("x"))).rejects.toThrow("vendor: socket closed");
    await terminal.close();
    expect(calls.map((c) => c.split(" ")[1])).toEqual(["-HUP", "-KILL"]);
    expect(fake.events).toEqual(["dispose"]);
  });
});
