// The emulator kit's OpenSSH server as a real `ssh` client sees it: sessions carried to the
// handler (command, stdin, stdout and stderr apart, exit status and signal), host keys per host,
// channels multiplexed on one connection, connections dropped, and the recorder's view. The handler
// here runs no command: it answers from the command text.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFaultInjector } from "../faults/injector.js";
import { createRequestRecorder } from "../recorder/recorder.js";
import { startSshServer, type SshServer } from "./server.js";

const dir = mkdtempSync(join(tmpdir(), "emu-ssh-test-"));
const key = join(dir, "id");
execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", key]);
const recorder = createRequestRecorder();
const faults = createFaultInjector();
const FLOOD_CHUNKS = 64;
const FLOOD_CHUNK = 64 * 1024;
let server: SshServer;
let gone = 0;

beforeAll(async () => {
  server = await startSshServer({
    recorder,
    faults,
    stateParentDir: dir,
    async onSession(session) {
      session.signal.addEventListener("abort", () => (gone += 1));
      const command = session.command ?? "";
      if (command.startsWith("upper")) {
        const chunks: Buffer[] = [];
        for await (const chunk of session.stdin) chunks.push(chunk as Buffer);
        session.stdout.end(Buffer.concat(chunks).toString().toUpperCase());
        session.stderr.end(`${session.host} ${session.user}\n`);
        return { exitCode: 7 };
      }
      if (command === "flood") {
        // Written without waiting for back-pressure, and the handler returns at once: the
        // Writables still hold most of it, as they do after a runner resolves on the exit.
        for (let i = 0; i < FLOOD_CHUNKS; i++) session.stdout.write(Buffer.alloc(FLOOD_CHUNK, 97 + (i % 26)));
        session.stderr.write("done\n");
        session.stdin.resume();
        return { exitCode: 3 };
      }
      if (command === "signal") return { exitCode: null, signal: "SIGTERM" };
      if (command === "hang") await new Promise((resolve) => session.signal.addEventListener("abort", resolve));
      session.stdin.resume();
      return { exitCode: 0 };
    },
  });
  await server.setAuthorizedKeys([readFileSync(`${key}.pub`, "utf8")]);
}, 60_000);
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

const ssh = (port: number, args: string[], stdin = "", knownHosts = join(dir, "known_hosts")) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn("ssh", [
      "-F",
      "none",
      "-o",
      "LogLevel=ERROR",
      "-o",
      "BatchMode=yes",
      "-i",
      key,
      "-o",
      "IdentitiesOnly=yes",
      "-o",
      `UserKnownHostsFile=${knownHosts}`,
      "-o",
      "StrictHostKeyChecking=accept-new",
      "-p",
      String(port),
      "-l",
      server.loginUser,
      ...args,
    ]);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.stdin.end(stdin);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });

describe("startSshServer", () => {
  it("carries a session's command, stdin, stdout, stderr and exit status to and from the handler", async () => {
    const host = await server.addHost("box-a");
    expect(await ssh(host.port, ["127.0.0.1", "upper please"], "some input")).toEqual({ code: 7, stdout: "SOME INPUT", stderr: `box-a ${server.loginUser}\n` });
    // sshd reports a signal as exit-signal; the client then exits 255.
    expect((await ssh(host.port, ["127.0.0.1", "signal"])).code).toBe(255);
    const sessions = recorder.list({ protocol: "ssh", method: "EXEC" }).filter((record) => record.path === "box-a");
    expect(sessions.map((record) => record.status)).toEqual([7, 255]);
    await host.close();
  }, 60_000);

  it("sends everything a handler wrote before its exit status, however much the Writables still hold", async () => {
    const host = await server.addHost("box-e");
    const flood = await ssh(host.port, ["127.0.0.1", "flood"]);
    expect({ code: flood.code, bytes: flood.stdout.length, stderr: flood.stderr }).toEqual({ code: 3, bytes: FLOOD_CHUNKS * FLOOD_CHUNK, stderr: "done\n" });
    expect(flood.stdout.slice(-3)).toBe("lll");
    await host.close();
  }, 60_000);

  it("gives each host its own key, and a rotated key is refused against the recorded one", async () => {
    const one = await server.addHost("box-b");
    const two = await server.addHost("box-c");
    expect(one.hostPublicKey()).not.toBe(two.hostPublicKey());
    const knownHosts = join(dir, "kh-rotate");
    expect((await ssh(one.port, ["127.0.0.1", "ok"], "", knownHosts)).code).toBe(0);
    await one.rotateHostKey();
    const refused = await ssh(one.port, ["127.0.0.1", "ok"], "", knownHosts);
    expect(refused.code).toBe(255);
    expect(refused.stderr).toMatch(/REMOTE HOST IDENTIFICATION HAS CHANGED/);
    await one.close();
    await two.close();
  }, 60_000);

  it("multiplexes channels on one connection, and a dropped connection ends its sessions", async () => {
    const host = await server.addHost("box-d");
    const control = join(dir, "c");
    expect((await ssh(host.port, ["-M", "-N", "-f", "-o", `ControlPath=${control}`, "-o", "ControlPersist=30", "127.0.0.1"])).code).toBe(0);
    for (let i = 0; i < 3; i++) expect((await ssh(host.port, ["-o", `ControlPath=${control}`, "127.0.0.1", "upper x"], "x")).stdout).toBe("X");
    expect([host.connections, host.liveConnections]).toEqual([1, 1]);
    const before = gone;
    const hanging = ssh(host.port, ["-o", `ControlPath=${control}`, "127.0.0.1", "hang"]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(host.dropConnections()).toBe(1);
    expect((await hanging).code).toBe(255);
    // The gate saw its sshd go: the handler's signal aborts.
    for (let i = 0; i < 100 && gone === before; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(gone).toBeGreaterThan(before);
    expect(recorder.count({ protocol: "ssh", method: "CONNECT" })).toBeGreaterThanOrEqual(1);
    await host.close();
  }, 60_000);

  it("delays a session's start by an armed latency fault, and records it on that session", async () => {
    const host = await server.addHost("box-f");
    faults.inject({ kind: "latency", ms: 400, route: "ssh-session", method: "EXEC", times: 1 });
    const started = Date.now();
    expect((await ssh(host.port, ["127.0.0.1", "upper a"], "a")).stdout).toBe("A");
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect((await ssh(host.port, ["127.0.0.1", "upper b"], "b")).stdout).toBe("B");
    const sessions = recorder.list({ protocol: "ssh", method: "EXEC" }).filter((record) => record.path === "box-f");
    expect(sessions.map((record) => record.faults)).toEqual([["latency"], []]);
    expect(faults.applied().map((fault) => [fault.route, fault.method])).toEqual([["ssh-session", "EXEC"]]);
    await host.close();
  }, 60_000);
});
