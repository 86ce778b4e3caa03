import { afterEach, describe, expect, it, vi } from "vitest";
import { STREAM_TRANSPORT, type PtyExit, type PtyProcess, type PtySignal, type PtySpec, type ScriptIo, type ScriptRunner } from "../transport.js";
import { createLoginPtys, MAX_LOGIN_OUTPUT_CHARS, splitText } from "./login-ptys.js";

// The hook mechanics over a scripted PTY transport; the real terminals (bytes, echo, ^C, exit codes,
// the session-home checks in a sandbox) are the conformance suite's `login-pty-*` cases.
const HOME = "/tmp/paperclip-adapter-login/0b5e2c3a-1d4f-4e6a-9b7c-8d9e0f1a2b3c";
const scope = { driverKey: "d", companyId: "c", environmentId: "e", providerLeaseId: "lease-1" };

class FakeTerminal implements PtyProcess {
  readonly writes: string[] = [];
  readonly signals: PtySignal[] = [];
  closed = 0;
  private finish!: (exit: PtyExit) => void;
  readonly exited = new Promise<PtyExit>((resolve) => (this.finish = resolve));
  /** A write the sandbox acknowledges only when told (the next write must still come after it). */
  holdWrites = false;
  private held: Array<() => void> = [];
  constructor(
    readonly spec: PtySpec,
    private readonly answersClose = true,
  ) {}
  emit(bytes: Buffer | string) {
    this.spec.onData(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
  }
  end(exit: PtyExit) {
    this.finish(exit);
  }
  releaseWrites() {
    for (const done of this.held.splice(0)) done();
  }
  async write(bytes: Buffer) {
    this.writes.push(bytes.toString("utf8"));
    if (this.holdWrites) await new Promise<void>((resolve) => this.held.push(resolve));
  }
  async resize() {}
  async kill(signal: PtySignal = "SIGTERM") {
    this.signals.push(signal);
  }
  async close() {
    this.closed += 1;
    if (!this.answersClose) return new Promise<void>(() => undefined);
    this.finish({ exitCode: null, signal: "SIGHUP" });
  }
}

function harness(opts: { homeExit?: number; homeStderr?: string; answersClose?: boolean; leaseSignal?: AbortSignal } = {}) {
  const scripts: string[] = [];
  const terminals: FakeTerminal[] = [];
  const runner: ScriptRunner = {
    capabilities: { ...STREAM_TRANSPORT, pty: true },
    async run(script: string, io: ScriptIo) {
      scripts.push(script);
      if (opts.homeStderr && typeof io.stderr === "function") io.stderr(Buffer.from(opts.homeStderr));
      return { exitCode: opts.homeExit ?? 0, signal: null, reason: "exit" };
    },
    pty: {
      async open(spec) {
        const terminal = new FakeTerminal(spec, opts.answersClose ?? true);
        terminals.push(terminal);
        return terminal;
      },
    },
  };
  const events: Array<{ kind: "output"; route: string; session: string; chunk: string } | { kind: "exit"; route: string; session: string; code: number | null }> = [];
  const logins = createLoginPtys({
    leaseFor: async (s) => {
      if (s.providerLeaseId !== "lease-1") throw new Error(`lease ${s.providerLeaseId} is not held by this worker`);
      return { runner, leaseSignal: opts.leaseSignal };
    },
    notify: () => ({
      output: (route, session, chunk) => events.push({ kind: "output", route, session, chunk }),
      exit: (route, session, code) => events.push({ kind: "exit", route, session, code }),
    }),
    stopGraceMs: 2_000,
    closeTimeoutMs: 5_000,
  });
  const output = () =>
    events
      .filter((e) => e.kind === "output")
      .map((e) => (e as { chunk: string }).chunk)
      .join("");
  return { logins, scripts, terminals, events, output };
}

const open = (logins: ReturnType<typeof harness>["logins"], extra: Record<string, unknown> = {}) =>
  logins.open({ ...scope, hostRouteId: "route-1", loginCommandKey: "codex", sessionHome: HOME, ...extra } as Parameters<typeof logins.open>[0]);

afterEach(() => vi.useRealTimers());

describe("login pseudo-terminals (onLoginPty*)", () => {
  it.each([
    ["a command key outside the closed set", { loginCommandKey: "bash" }, /loginCommandKey must be one of claude, codex, grok/],
    ["a command smuggled as the key", { loginCommandKey: "codex; rm -rf /" }, /loginCommandKey/],
    ["a relative session home", { sessionHome: "tmp/paperclip-adapter-login/0b5e2c3a-1d4f-4e6a-9b7c-8d9e0f1a2b3c" }, /sessionHome must be exactly/],
    ["a traversal out of the root", { sessionHome: "/tmp/paperclip-adapter-login/../../etc" }, /sessionHome/],
    ["an uppercase uuid", { sessionHome: HOME.toUpperCase() }, /sessionHome/],
    ["a trailing slash", { sessionHome: `${HOME}/` }, /sessionHome/],
    ["a shell metacharacter", { sessionHome: `${HOME}$(id)` }, /sessionHome/],
    ["an empty route id", { hostRouteId: "" }, /hostRouteId must be a non-empty string/],
  ])("refuses %s before touching the sandbox", async (_what, extra, error) => {
    const { logins, scripts, terminals } = harness();
    await expect(open(logins, extra)).rejects.toThrow(error);
    expect(scripts).toEqual([]);
    expect(terminals).toEqual([]);
  });

  it("runs the key's fixed command in a new 0700 session home on a 120x30 terminal", async () => {
    const { logins, scripts, terminals } = harness();
    const { workerSessionId } = await open(logins);
    expect(workerSessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(scripts).toHaveLength(1);
    expect(scripts[0]).toContain(`mkdir -m 0700 '${HOME}'`);
    const spec = terminals[0]!.spec;
    expect([spec.cols, spec.rows]).toEqual([120, 30]);
    expect(spec.env).toEqual({ TERM: "xterm-256color" });
    expect(spec.script.trimEnd().split("\n").at(-1)).toBe(`exec env CODEX_HOME='${HOME}' codex login --device-auth`);
    // The checks run again inside the terminal, right before the command.
    expect(spec.script).toContain(`[ "$2" = 700 ]`);

    const claude = harness();
    await open(claude.logins, { loginCommandKey: "claude" });
    expect(claude.terminals[0]!.spec.script.trimEnd().split("\n").at(-1)).toBe("exec claude setup-token");
    const grok = harness();
    await open(grok.logins, { loginCommandKey: "grok" });
    expect(grok.terminals[0]!.spec.script.trimEnd().split("\n").at(-1)).toBe(`exec env GROK_HOME='${HOME}' grok login --device-auth`);
  });

  it("refuses with the sandbox's reason when the session home cannot be made, and opens no terminal", async () => {
    const { logins, terminals } = harness({ homeExit: 86, homeStderr: "LOGIN_PTY_HOME_REJECTED: the session home already exists or cannot be created\n" });
    await expect(open(logins)).rejects.toThrow("LOGIN_PTY_HOME_REJECTED: the session home already exists or cannot be created");
    expect(terminals).toEqual([]);
    expect(logins.size).toBe(0);
  });

  it("streams output as text, keeps a character split between reads whole, and sends the exit after the last byte", async () => {
    const { logins, terminals, events, output } = harness();
    const { workerSessionId } = await open(logins);
    const terminal = terminals[0]!;
    const text = Buffer.from("café ✓ prompt> ");
    terminal.emit(text.subarray(0, 4)); // "caf" + the first byte of "é"
    terminal.emit(text.subarray(4, 9));
    terminal.emit(text.subarray(9));
    terminal.end({ exitCode: 0, signal: null });
    await vi.waitFor(() => expect(events.at(-1)?.kind).toBe("exit"));
    expect(output()).toBe("café ✓ prompt> ");
    expect(events.every((e) => e.route === "route-1" && e.session === workerSessionId)).toBe(true);
    expect(events.at(-1)).toMatchObject({ kind: "exit", code: 0 });
    expect(events.filter((e) => e.kind === "exit")).toHaveLength(1);
  });

  it("hands keystrokes to the terminal in the order they arrived, even while the sandbox is slow to take them", async () => {
    const { logins, terminals } = harness();
    const { workerSessionId } = await open(logins);
    const terminal = terminals[0]!;
    terminal.holdWrites = true;
    const sent = ["A", "B", "\r", "\x03"].map((data) => logins.input({ workerSessionId, data }));
    terminal.releaseWrites();
    await Promise.all(sent);
    expect(terminal.writes).toEqual(["A", "B", "\r", "\x03"]);
    await expect(logins.input({ workerSessionId: "not-a-session", data: "x" })).rejects.toThrow(/no open login terminal/);
  });

  it("splits output over the host's chunk size without cutting a surrogate pair", () => {
    const long = "a".repeat(MAX_LOGIN_OUTPUT_CHARS - 1) + "😀" + "b";
    const pieces = splitText(long, MAX_LOGIN_OUTPUT_CHARS);
    expect(pieces.join("")).toBe(long);
    expect(pieces[0]!.length).toBe(MAX_LOGIN_OUTPUT_CHARS - 1);
    expect(pieces.every((p) => p.length <= MAX_LOGIN_OUTPUT_CHARS)).toBe(true);
  });

  it("stop sends SIGTERM, then SIGKILL after the grace unless the program has ended", async () => {
    vi.useFakeTimers();
    const { logins, terminals } = harness();
    const { workerSessionId } = await open(logins);
    const terminal = terminals[0]!;
    await logins.stop({ workerSessionId });
    expect(terminal.signals).toEqual(["SIGTERM"]);
    await vi.advanceTimersByTimeAsync(1_999);
    expect(terminal.signals).toEqual(["SIGTERM"]);
    await vi.advanceTimersByTimeAsync(1);
    expect(terminal.signals).toEqual(["SIGTERM", "SIGKILL"]);

    const second = harness();
    const opened = await open(second.logins);
    await second.logins.stop({ workerSessionId: opened.workerSessionId });
    second.terminals[0]!.end({ exitCode: 143, signal: null });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(second.terminals[0]!.signals).toEqual(["SIGTERM"]);
  });

  it("close is keyed by the host route id, answers for a route it does not know, and ends the terminal", async () => {
    const { logins, terminals } = harness();
    expect(await logins.close({ hostRouteId: "never-opened" })).toEqual({ hostRouteId: "never-opened" });
    await open(logins);
    // No worker session id: the open reply was lost, the host closes by route.
    expect(await logins.close({ hostRouteId: "route-1" })).toEqual({ hostRouteId: "route-1" });
    expect(terminals[0]!.closed).toBe(1);
    expect(logins.size).toBe(0);
    expect(await logins.close({ hostRouteId: "route-1" })).toEqual({ hostRouteId: "route-1" });
    // The route can be opened again once closed.
    await open(logins);
    expect(logins.size).toBe(1);
  });

  it("answers a close within its bound when the sandbox never confirms (the host retires a worker after 10 s)", async () => {
    vi.useFakeTimers();
    const { logins } = harness({ answersClose: false });
    await open(logins);
    let answered = false;
    const closing = logins.close({ hostRouteId: "route-1" }).then((r) => ((answered = true), r));
    await vi.advanceTimersByTimeAsync(4_999);
    expect(answered).toBe(false);
    await vi.advanceTimersByTimeAsync(300);
    expect(await closing).toEqual({ hostRouteId: "route-1" });
  });

  it("a second open on a route that is open is refused; the lease's end closes its terminals", async () => {
    const lease = new AbortController();
    const { logins, terminals } = harness({ leaseSignal: lease.signal });
    await open(logins);
    await expect(open(logins)).rejects.toThrow(/already open for this hostRouteId/);
    lease.abort();
    await vi.waitFor(() => expect(terminals[0]!.closed).toBe(1));
    expect(logins.size).toBe(0);

    const other = harness();
    await open(other.logins);
    await other.logins.closeLease("lease-1");
    expect(other.terminals[0]!.closed).toBe(1);
  });

  it("refuses a lease this worker does not serve", async () => {
    const { logins } = harness();
    await expect(open(logins, { providerLeaseId: "lease-2" })).rejects.toThrow(/not held by this worker/);
  });
});
