// The bridge's terminal route (`GET /terminal`, a WebSocket) run for real in workerd with
// @cloudflare/sandbox 0.7.21 over the stand-in container's `/ws/pty`: auth like every route, bytes
// both ways, the command's end reported as a status frame with the marker cut out, and nothing left
// running once either side is done. The end marker's scanner is tested on its own.
import { afterAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-cloudflare";
import { EndMarker } from "../bridge/src/end-marker.js";
import { openBridgeTerminal } from "./terminal.js";

const emu = await runEmulator(emulator, {});
afterAll(() => emu.close(), 60_000);

const base = `${emu.url}/api/paperclip-sandbox/v1`;
const auth = { authorization: `Bearer ${emu.credentials.token}` };

async function lease(): Promise<string> {
  const response = await fetch(`${base}/leases/acquire`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ environmentId: "env", runId: `run-${Math.random().toString(36).slice(2)}` }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { providerLeaseId: string }).providerLeaseId;
}

const destroy = (id: string) => fetch(`${base}/leases/${id}`, { method: "DELETE", headers: auth });

async function ps(providerLeaseId: string): Promise<string> {
  const response = await fetch(`${base}/exec`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ providerLeaseId, command: "sh", args: ["-c", "ps -eo args"], sessionId: "inspector", streamOutput: false }),
  });
  return ((await response.json()) as { stdout: string }).stdout;
}

interface Terminal {
  socket: WebSocket;
  output(): string;
  frames: Array<Record<string, unknown>>;
  closed: Promise<number>;
  until(cond: () => boolean): Promise<void>;
}

function terminalUrl(query: Record<string, string>): URL {
  const url = new URL(`${base.replace(/^http/, "ws")}/terminal`);
  url.search = new URLSearchParams(query).toString();
  return url;
}

/** Opens a terminal; rejects with the refusal's status and body. */
function open(query: Record<string, string>, headers: Record<string, string> = auth): Promise<Terminal> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(terminalUrl(query), { headers });
    const bytes: Buffer[] = [];
    const frames: Array<Record<string, unknown>> = [];
    const closed = new Promise<number>((done) => socket.on("close", (code) => done(code)));
    socket.on("message", (data: Buffer, isBinary: boolean) => (isBinary ? bytes.push(data) : frames.push(JSON.parse(data.toString("utf8")) as Record<string, unknown>)));
    socket.on("unexpected-response", (_request, response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
      response.on("end", () => reject(new Error(`${response.statusCode} ${body}`)));
    });
    socket.on("error", reject);
    socket.on("open", () =>
      resolve({
        socket,
        frames,
        closed,
        output: () => Buffer.concat(bytes).toString("utf8"),
        async until(cond) {
          while (!cond()) await new Promise((r) => setTimeout(r, 20));
        },
      }),
    );
  });
}

describe("the bridge's terminal route", () => {
  it("refuses an upgrade without the bearer, or with the token in the query, before touching any sandbox", async () => {
    const id = await lease();
    try {
      const mark = emu.requests.mark();
      await expect(open({ providerLeaseId: id, command: "true" }, {})).rejects.toThrow(/^401 .*Missing or invalid bridge bearer token/);
      await expect(open({ providerLeaseId: id, command: "true", token: emu.credentials.token!, access_token: emu.credentials.token! }, {})).rejects.toThrow(/^401 /);
      // Only the two refused upgrades reached the bridge (nothing was staged in the sandbox).
      expect(emu.requests.list({ since: mark }).map((r) => r.status)).toEqual([401, 401]);
    } finally {
      await destroy(id);
    }
  });

  it("refuses a lease it does not hold without booting a container, and names bad sizes", async () => {
    await expect(open({ providerLeaseId: "pc-gone-12345678", command: "true" })).rejects.toThrow(/^409 .*sandbox_state_lost/);
    expect(await emu.leftovers()).toEqual([]);
    const id = await lease();
    try {
      await expect(open({ providerLeaseId: id, command: "true", cols: "0" })).rejects.toThrow(/^400 .*cols must be a whole number from 1 to 10000/);
      await expect(open({ providerLeaseId: id, command: "" })).rejects.toThrow(/^400 .*command must be a shell command line/);
    } finally {
      await destroy(id);
    }
  });

  it("a release that lands while a terminal opens leaves no container, even when the open then fails", async () => {
    const id = await lease();
    const C = "/c/:cid/p/:port";
    try {
      // The terminal's staging waits at the container while the lease is destroyed; it then boots a
      // fresh container, and the container's terminal refuses: the bridge must end what it booted.
      emu.faults.inject({ kind: "latency", ms: 400, route: `${C}/api/execute`, method: "POST", times: 1 });
      emu.faults.inject({ kind: "status", status: 500, route: `${C}/ws/pty`, times: 1 });
      const mark = emu.requests.mark();
      const opening = open({ providerLeaseId: id, command: "true" });
      opening.catch(() => undefined);
      while (!emu.requests.list({ since: mark, includeRunning: true }).some((r) => r.route === `${C}/api/execute`)) await new Promise((r) => setTimeout(r, 10));
      expect((await destroy(id)).status).toBe(200);
      await expect(opening).rejects.toThrow(/^(409|500|502) /);
      expect(await emu.leftovers()).toEqual([]);
    } finally {
      emu.faults.clear();
      await destroy(id);
    }
  });

  it("carries bytes both ways on a real terminal, reports the exit status and cuts the end marker out", async () => {
    const id = await lease();
    try {
      const term = await open({ providerLeaseId: id, command: 'stty size; tty >/dev/null && echo on-a-tty; IFS= read -r line; echo "got[$line]"; exit 7', cols: "101", rows: "33" });
      await term.until(() => term.output().includes("on-a-tty"));
      term.socket.send(Buffer.from("héllo\r"));
      expect(await term.closed).toBe(1000);
      expect(term.frames.at(-1)).toEqual({ type: "exit", code: 7 });
      expect(term.output()).toContain("33 101");
      expect(term.output()).toContain("got[héllo]");
      expect(term.output()).not.toContain("paperclip-exit");
      // The terminal's session and wrapper are gone with it.
      await expect.poll(() => ps(id), { timeout: 30_000 }).not.toMatch(/paperclip-term/);
    } finally {
      await destroy(id);
    }
  });

  it("resizes the terminal from a resize frame (the program gets SIGWINCH)", async () => {
    const id = await lease();
    try {
      const term = await open({ providerLeaseId: id, command: "trap 'stty size; exit 0' WINCH; echo armed; while :; do sleep 0.05; done", cols: "80", rows: "24" });
      await term.until(() => term.output().includes("armed"));
      term.socket.send(JSON.stringify({ type: "resize", cols: 132, rows: 40 }));
      expect(await term.closed).toBe(1000);
      expect(term.output()).toContain("40 132");
      expect(term.frames.at(-1)).toEqual({ type: "exit", code: 0 });
    } finally {
      await destroy(id);
    }
  });

  it("ends the program when the client goes away", async () => {
    const id = await lease();
    try {
      const term = await open({ providerLeaseId: id, command: "echo started; exec sleep 3131" });
      await term.until(() => term.output().includes("started"));
      expect(await ps(id)).toMatch(/sleep 3131/);
      term.socket.close();
      await expect.poll(() => ps(id), { timeout: 30_000 }).not.toMatch(/sleep 3131/);
    } finally {
      await destroy(id);
    }
  });
});

describe("the plugin's terminal open", () => {
  it("a refused upgrade is the error the bridge's HTTP routes give: its code, gone, nothing started, no token", async () => {
    const config = { bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token! } as Parameters<typeof openBridgeTerminal>[0];
    const refused = await openBridgeTerminal(config, "pc-gone-12345678", "true", { cols: 80, rows: 24 }, () => undefined).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ vendor: "cloudflare", operation: "openTerminal", status: 409, code: "sandbox_state_lost", gone: true, mayHaveTakenEffect: false });
    expect(String((refused as Error).message)).toContain("Cloudflare sandbox state is no longer available.");
    expect(JSON.stringify(refused)).not.toContain(emu.credentials.token!);
    expect(await emu.leftovers()).toEqual([]);
  });
});

describe("the end marker", () => {
  const nonce = "0123456789abcdef0123456789abcdef";
  const marker = `\x1b]paperclip-exit;${nonce};42\x07`;
  const text = (bytes: Uint8Array) => Buffer.from(bytes).toString("latin1");

  it("finds the marker split across frames at every byte, passing everything before it", () => {
    const whole = Buffer.from(`out\x1b[1mput${marker}`, "latin1");
    for (let cut = 0; cut <= whole.length; cut += 1) {
      const scanner = new EndMarker(nonce);
      const first = scanner.scan(whole.subarray(0, cut));
      const second = scanner.scan(whole.subarray(cut));
      expect(text(first.out) + text(second.out)).toBe("out\x1b[1mput");
      expect(first.exitCode ?? second.exitCode).toBe(42);
    }
  });

  it("passes a marker with another nonce through as output (output that merely looks like one ends nothing)", () => {
    const scanner = new EndMarker(nonce);
    const forged = `\x1b]paperclip-exit;${"f".repeat(32)};0\x07`;
    const { out, exitCode } = scanner.scan(Buffer.from(forged, "latin1"));
    expect(exitCode).toBeUndefined();
    expect(text(out)).toBe(forged);
  });

  it("holds back only what may begin the marker, and gives it back when it does not", () => {
    const scanner = new EndMarker(nonce);
    expect(text(scanner.scan(Buffer.from("abc\x1b]pap", "latin1")).out)).toBe("abc");
    expect(text(scanner.scan(Buffer.from("er", "latin1")).out)).toBe("");
    expect(text(scanner.scan(Buffer.from("!", "latin1")).out)).toBe("\x1b]paper!");
  });
});
