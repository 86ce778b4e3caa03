import { connect as netConnect } from "node:net";
import ssh2 from "ssh2";
import type { ClientChannel } from "ssh2";
import { afterEach, describe, expect, it } from "vitest";
import type { PtyExit, PtyProcess, PtySize, PtySpec } from "../transport.js";
import { createSshSetupGateway, generateHostKey, type SetupShellTarget, type SshSetupGateway } from "./ssh-gateway.js";

/** A fake terminal: echoes what is typed, `exit N\r` ends it with N, records sizes and closes. */
interface FakeShell {
  spec: PtySpec;
  sizes: PtySize[];
  /** The terminal's size when each write arrived. */
  writesAt: { text: string; size: PtySize }[];
  resizing: number;
  closed: boolean;
}

function fakeTarget(providerLeaseId: string, resizeGate?: Promise<void>): SetupShellTarget & { opened: FakeShell[] } {
  const opened: FakeShell[] = [];
  return {
    providerLeaseId,
    opened,
    async openPty(spec) {
      const shell: FakeShell = { spec, sizes: [{ cols: spec.cols, rows: spec.rows }], writesAt: [], resizing: 0, closed: false };
      opened.push(shell);
      let end!: (exit: PtyExit) => void;
      const exited = new Promise<PtyExit>((resolve) => (end = resolve));
      let line = "";
      const process: PtyProcess = {
        async write(bytes) {
          const text = bytes.toString("utf8");
          shell.writesAt.push({ text, size: shell.sizes.at(-1)! });
          spec.onData(Buffer.from(`${providerLeaseId}:${text}`));
          line += text;
          const match = /exit (\d+)\r/.exec(line);
          if (match) end({ exitCode: Number(match[1]), signal: null });
        },
        async resize(size) {
          shell.resizing += 1;
          // A transport whose resize travels apart from its bytes (and takes longer).
          await resizeGate;
          shell.sizes.push(size);
        },
        async kill() {
          end({ exitCode: null, signal: "SIGTERM" });
        },
        exited,
        async close() {
          shell.closed = true;
          end({ exitCode: null, signal: "SIGHUP" });
        },
      };
      return process;
    },
  };
}

/** The host's way (environment-custom-image-terminal-ws.js): the user name is the credential, no key, no password. */
function parsePayload(command: string | null | undefined) {
  const match = /^ssh -p (\d+) ([^\s@]+)@(127\.0\.0\.1)$/.exec(command ?? "");
  if (!match) throw new Error(`not the host's ssh shape: ${command}`);
  return { port: Number(match[1]), username: match[2]!, host: match[3]! };
}

const clients: InstanceType<typeof ssh2.Client>[] = [];
const gateways: SshSetupGateway[] = [];

function connectAs(target: { port: number; username: string; host: string }): Promise<InstanceType<typeof ssh2.Client>> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    clients.push(client);
    client.once("ready", () => resolve(client));
    client.once("error", reject);
    client.connect({ host: target.host, port: target.port, username: target.username, hostHash: "sha256", hostVerifier: () => true, readyTimeout: 60_000 });
  });
}

function shellOf(client: InstanceType<typeof ssh2.Client>, size = { cols: 100, rows: 40 }): Promise<ClientChannel> {
  return new Promise((resolve, reject) => client.shell({ term: "xterm-256color", ...size }, { env: { LANG: "C.UTF-8", EVIL: "x" } }, (error, stream) => (error ? reject(error) : resolve(stream))));
}

function outputUntil(stream: ClientChannel, text: string): Promise<string> {
  return new Promise((resolve) => {
    let seen = "";
    const onData = (chunk: Buffer) => {
      seen += chunk.toString("utf8");
      if (seen.includes(text)) {
        stream.off("data", onData);
        resolve(seen);
      }
    };
    stream.on("data", onData);
  });
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
}

function gatewayWith(opts: Parameters<typeof createSshSetupGateway>[0] = {}): SshSetupGateway {
  const gateway = createSshSetupGateway(opts);
  gateways.push(gateway);
  return gateway;
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.end();
  await Promise.all(gateways.splice(0).map((gateway) => gateway.close()));
});

describe("the SSH setup gateway", () => {
  it("answers the host's ssh payload with a long random token bound to the lease", async () => {
    const gateway = gatewayWith();
    const target = fakeTarget("lease-a");
    const first = await gateway.connection(target, { expiresAt: null, minutes: 15 });
    const second = await gateway.connection(target, { expiresAt: null, minutes: 15 });
    expect(first.payload.type).toBe("ssh");
    expect(first.summary).toMatchObject({ type: "ssh", hostRedacted: true, portRedacted: true });
    const a = parsePayload(first.payload.command);
    const b = parsePayload(second.payload.command);
    expect(a.port).toBe(gateway.port);
    expect(a.username).not.toBe(b.username);
    // 192 bits, hex: the host's parser refuses a destination starting with "-".
    expect(a.username).toMatch(/^[0-9a-f]{48}$/);
    expect(JSON.stringify(first.summary)).not.toContain(a.username);
  });

  it("relays bytes both ways, passes resizes and ends the channel with the shell's exit status", async () => {
    const gateway = gatewayWith();
    const target = fakeTarget("lease-a");
    const client = await connectAs(parsePayload((await gateway.connection(target, { expiresAt: null, minutes: 15 })).payload.command));
    const stream = await shellOf(client);
    const exit = new Promise<number | null>((resolve) => stream.once("exit", (code: number | null) => resolve(code)));
    const closed = new Promise<void>((resolve) => stream.once("close", () => resolve()));
    const echoed = outputUntil(stream, "lease-a:héllo");
    stream.write("héllo");
    await echoed;
    const shell = target.opened[0]!;
    expect(shell.spec.env).toEqual({ LANG: "C.UTF-8", TERM: "xterm-256color" });
    expect(shell.sizes[0]).toEqual({ cols: 100, rows: 40 });
    stream.setWindow(50, 132, 0, 0);
    await until(() => shell.sizes.length > 1);
    expect(shell.sizes.at(-1)).toEqual({ cols: 132, rows: 50 });
    stream.write("exit 7\r");
    expect(await exit).toBe(7);
    await closed;
    expect(gateway.shells).toBe(0);
  });

  it("delivers a window change before the keystrokes typed after it, however slow the resize", async () => {
    const gateway = gatewayWith();
    let release!: () => void;
    const target = fakeTarget("lease-a", new Promise<void>((resolve) => (release = resolve)));
    const client = await connectAs(parsePayload((await gateway.connection(target, { expiresAt: null, minutes: 15 })).payload.command));
    const stream = await shellOf(client);
    const first = outputUntil(stream, "lease-a:a");
    stream.write("a");
    await first;
    const shell = target.opened[0]!;
    stream.setWindow(20, 70, 0, 0);
    stream.write("b");
    await until(() => shell.resizing === 1);
    // A refused exec's answer comes after the server handled everything sent before it ("b" too).
    await new Promise<void>((resolve) => client.exec("true", () => resolve()));
    expect(shell.writesAt.map((w) => w.text)).toEqual(["a"]);
    const second = outputUntil(stream, "lease-a:b");
    release();
    await second;
    expect(shell.writesAt.at(-1)).toEqual({ text: "b", size: { cols: 70, rows: 20 } });
  });

  it("refuses a wrong token without logging it, and opens nothing", async () => {
    const logs: string[] = [];
    const gateway = gatewayWith({ log: (message) => logs.push(message) });
    const target = fakeTarget("lease-a");
    const { port, host, username } = parsePayload((await gateway.connection(target, { expiresAt: null, minutes: 15 })).payload.command);
    const guess = `${username.slice(0, -1)}${username.endsWith("A") ? "B" : "A"}`;
    await expect(connectAs({ port, host, username: guess })).rejects.toThrow(/authentication/i);
    expect(target.opened).toHaveLength(0);
    expect(logs.join("\n")).toMatch(/unknown or expired token/);
    expect(logs.join("\n")).not.toContain(guess);
    expect(logs.join("\n")).not.toContain(username);
  });

  it("refuses a token once its minutes are over (injected clock)", async () => {
    let now = Date.parse("2026-12-03T12:00:00Z");
    const gateway = gatewayWith({ now: () => now });
    const target = fakeTarget("lease-a");
    const payload = (await gateway.connection(target, { expiresAt: null, minutes: 15 })).payload;
    expect(payload.expiresAt).toBe("2026-12-03T12:15:00.000Z");
    now += 15 * 60_000;
    await expect(connectAs(parsePayload(payload.command))).rejects.toThrow(/authentication/i);
    expect(target.opened).toHaveLength(0);
  });

  it("never lets a token outlive the setup sandbox's expiry", async () => {
    let now = Date.parse("2026-12-03T12:00:00Z");
    const gateway = gatewayWith({ now: () => now });
    const payload = (await gateway.connection(fakeTarget("lease-a"), { expiresAt: new Date(now + 60_000), minutes: 15 })).payload;
    expect(payload.expiresAt).toBe("2026-12-03T12:01:00.000Z");
    now += 60_000;
    await expect(connectAs(parsePayload(payload.command))).rejects.toThrow(/authentication/i);
  });

  it("opens the shell in the token's own lease, not another's", async () => {
    const gateway = gatewayWith();
    const a = fakeTarget("lease-a");
    const b = fakeTarget("lease-b");
    await gateway.connection(a, { expiresAt: null, minutes: 15 });
    const client = await connectAs(parsePayload((await gateway.connection(b, { expiresAt: null, minutes: 15 })).payload.command));
    const stream = await shellOf(client);
    const echoed = outputUntil(stream, "lease-b:x");
    stream.write("x");
    await echoed;
    expect(a.opened).toHaveLength(0);
    expect(b.opened).toHaveLength(1);
  });

  it("refuses exec, sftp and port forwarding", async () => {
    const gateway = gatewayWith();
    const target = fakeTarget("lease-a");
    const client = await connectAs(parsePayload((await gateway.connection(target, { expiresAt: null, minutes: 15 })).payload.command));
    await expect(new Promise((resolve, reject) => client.exec("id", (error, stream) => (error ? reject(error) : resolve(stream))))).rejects.toThrow();
    await expect(new Promise((resolve, reject) => client.sftp((error, sftp) => (error ? reject(error) : resolve(sftp))))).rejects.toThrow();
    await expect(new Promise((resolve, reject) => client.forwardOut("127.0.0.1", 1, "127.0.0.1", 22, (error, stream) => (error ? reject(error) : resolve(stream))))).rejects.toThrow();
    await expect(new Promise((resolve, reject) => client.forwardIn("127.0.0.1", 0, (error, port) => (error ? reject(error) : resolve(port))))).rejects.toThrow();
    expect(target.opened).toHaveLength(0);
  });

  it("ends a lease's connections when it closes, and leaves no listener after the last one", async () => {
    const gateway = gatewayWith();
    const a = fakeTarget("lease-a");
    const b = fakeTarget("lease-b");
    const forA = parsePayload((await gateway.connection(a, { expiresAt: null, minutes: 15 })).payload.command);
    await gateway.connection(b, { expiresAt: null, minutes: 15 });
    const client = await connectAs(forA);
    const stream = await shellOf(client);
    const echoed = outputUntil(stream, "lease-a:y");
    stream.write("y");
    await echoed;
    const gone = new Promise<void>((resolve) => client.once("close", () => resolve()));
    await gateway.closeLease("lease-a");
    await gone;
    expect(a.opened[0]!.closed).toBe(true);
    // Lease b still has its terminal: the listener stays; a's token is revoked.
    expect(gateway.port).toBe(forA.port);
    await expect(connectAs(forA)).rejects.toThrow(/authentication/i);
    await gateway.closeLease("lease-b");
    expect(gateway.port).toBeNull();
    const refused = await new Promise<string>((resolve) => {
      const socket = netConnect(forA.port, forA.host);
      socket.once("connect", () => {
        socket.destroy();
        resolve("connected");
      });
      socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });

  it("keeps one host key across listener restarts (the host pins it)", async () => {
    const gateway = gatewayWith();
    const keyOf = async (lease: string) => {
      const { port, host, username } = parsePayload((await gateway.connection(fakeTarget(lease), { expiresAt: null, minutes: 15 })).payload.command);
      let key = "";
      const client = new ssh2.Client();
      clients.push(client);
      await new Promise<void>((resolve, reject) => {
        client.once("ready", () => resolve());
        client.once("error", reject);
        client.connect({ host, port, username, hostHash: "sha256", hostVerifier: (hash: string) => ((key = hash), true), readyTimeout: 60_000 });
      });
      client.end();
      await gateway.closeLease(lease);
      return key;
    };
    const first = await keyOf("lease-a");
    expect(gateway.port).toBeNull();
    expect(await keyOf("lease-b")).toBe(first);
  });
});

describe("the gateway's host key", () => {
  // ssh2's generator alone makes a key its own parser refuses about once in 200: a setup start
  // failed on it ("Malformed OpenSSH private key"). 1000 keys hit that 99 times in 100 without the check.
  it("is always one ssh2 can load", () => {
    for (let i = 0; i < 1000; i++) expect(ssh2.utils.parseKey(generateHostKey())).not.toBeInstanceOf(Error);
  });
});
