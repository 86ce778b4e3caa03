// The emulator through the real @daytonaio/sdk: every route the daytona provider uses, the state
// machine, the lifecycle intervals on a compressed clock, and the errors the SDK maps.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { Daytona, DaytonaAuthenticationError, DaytonaConflictError, DaytonaFileNotFoundError, DaytonaNotFoundError, DaytonaTimeoutError, DaytonaValidationError, type Sandbox } from "@daytonaio/sdk";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, type DaytonaEmulatorOptions } from "./index.js";

const running: RunningEmulator[] = [];
afterAll(async () => {
  for (const emu of running) await emu.close();
}, 60_000);

async function start(options: DaytonaEmulatorOptions = {}) {
  const emu = await runEmulator(emulator, { options });
  running.push(emu);
  const sdk = new Daytona({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url, useDeprecatedPolling: true });
  return { emu, sdk };
}

const waitFor = async (what: string, check: () => Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};

const stateOf = async (sdk: Daytona, id: string) => {
  try {
    return (await sdk.get(id)).state;
  } catch (error) {
    if (error instanceof DaytonaNotFoundError) return "gone";
    throw error;
  }
};

describe("control plane", () => {
  it("creates, gets, lists by label, stops, starts, archives, restores and deletes", async () => {
    const { emu, sdk } = await start();
    const sandbox = await sdk.create({ labels: { team: "a", run: "1" }, envVars: { GREETING: "hi" } });
    expect(sandbox.state).toBe("started");
    expect(sandbox.toolboxProxyUrl).toBe(emu.endpoints.toolbox);
    expect(sandbox.labels).toMatchObject({ team: "a", "code-toolbox-language": "python" });
    expect([sandbox.autoStopInterval, sandbox.autoArchiveInterval, sandbox.autoDeleteInterval]).toEqual([15, 10_080, -1]);
    expect((await sandbox.process.executeCommand("printf %s $GREETING")).result).toBe("hi");
    const other = await sdk.create({ labels: { team: "b" } });

    const listed: string[] = [];
    for await (const found of sdk.list({ labels: { team: "a" }, limit: 1 })) listed.push(found.id);
    expect(listed).toEqual([sandbox.id]);
    const all: string[] = [];
    for await (const found of sdk.list({ limit: 1 })) all.push(found.id); // pages of one, by cursor
    expect(all.sort()).toEqual([sandbox.id, other.id].sort());

    await sandbox.process.executeCommand("echo kept > /home/sandbox/kept.txt");
    await sandbox.stop();
    expect(sandbox.state).toBe("stopped");
    await sandbox.start();
    expect((await sandbox.process.executeCommand("cat /home/sandbox/kept.txt")).result).toBe("kept\n");
    await sandbox.stop();
    await sandbox.archive();
    expect(await stateOf(sdk, sandbox.id)).toBe("archived");
    await sandbox.start(); // restores the archived disk
    expect((await sandbox.process.executeCommand("cat /home/sandbox/kept.txt")).result).toBe("kept\n");

    await sandbox.delete(60, true);
    await other.delete(60, true);
    expect(await stateOf(sdk, sandbox.id)).toBe("gone");
    expect(await emu.leftovers()).toEqual([]);
  });

  it("goes through the transitional states for transitionMs, refuses a change meanwhile (409), and the SDK waits", async () => {
    const { sdk } = await start({ transitionMs: 300 });
    const started = Date.now();
    const sandbox = await sdk.create({}); // answered "creating"; the SDK polls until "started"
    expect(sandbox.state).toBe("started");
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    const stopping = sandbox.stop();
    await waitFor("stopping", async () => (await stateOf(sdk, sandbox.id)) === "stopping");
    await expect((await sdk.get(sandbox.id)).start()).rejects.toBeInstanceOf(DaytonaConflictError);
    await stopping;
    expect(await stateOf(sdk, sandbox.id)).toBe("stopped");
    await sandbox.delete(60, true); // "destroying", then gone
    expect(await stateOf(sdk, sandbox.id)).toBe("gone");
  });

  it("answers the errors the SDK maps: 404, 401, quota (400), a stopped sandbox's toolbox (502 with its state)", async () => {
    const { emu, sdk } = await start({ quota: { cpu: 2, memory: 8, disk: 6 } });
    await expect(sdk.get("no-such-sandbox")).rejects.toMatchObject({ name: "DaytonaNotFoundError", statusCode: 404, message: "Sandbox with ID or name no-such-sandbox not found" });
    const stranger = new Daytona({ apiKey: "dtn_wrong", apiUrl: emu.url, useDeprecatedPolling: true });
    await expect(stranger.get("x")).rejects.toBeInstanceOf(DaytonaAuthenticationError);
    const first = await sdk.create({});
    const second = await sdk.create({});
    const refused = await sdk.create({}).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(DaytonaValidationError);
    expect((refused as Error).message).toBe("Total CPU limit exceeded. Maximum allowed: 2.");
    await second.stop(); // a stopped sandbox frees CPU and memory but still holds its disk
    await expect(sdk.create({})).rejects.toThrow("Total disk limit exceeded. Maximum allowed: 6GiB.");
    const down = await first.process
      .executeCommand("true")
      .then(() => first.stop())
      .then(() => first.process.executeCommand("true"))
      .catch((error: unknown) => error);
    expect(down).toMatchObject({ statusCode: 502 });
    expect((down as { headers: { get(name: string): unknown } }).headers.get("x-daytona-sandbox-state")).toBe("stopped");
    await first.delete(60, true);
    await second.delete(60, true);
  });
});

describe("lifecycle intervals on a compressed clock (1 Daytona minute = 100 ms)", () => {
  it("auto-stops an idle sandbox, archives and then deletes a stopped one, deletes an ephemeral one on stop, ends a TTL", async () => {
    const { emu, sdk } = await start({ minuteMs: 100 });
    const idle = await sdk.create({ autoStopInterval: 1, autoArchiveInterval: 2, autoDeleteInterval: 5 });
    const timeline: string[] = [];
    await waitFor("auto-stop", async () => (await stateOf(sdk, idle.id)) === "stopped");
    timeline.push("stopped");
    await waitFor("auto-archive", async () => (await stateOf(sdk, idle.id)) === "archived");
    timeline.push("archived");
    await waitFor("auto-delete", async () => (await stateOf(sdk, idle.id)) === "gone");
    timeline.push("deleted");
    expect(timeline).toEqual(["stopped", "archived", "deleted"]);

    const busy = await sdk.create({ autoStopInterval: 1 });
    const ran = await busy.process.executeCommand("sleep 0.4; echo still-running"); // an open request is activity
    expect(ran.result).toBe("still-running\n");
    const ephemeral = await sdk.create({ ephemeral: true, autoStopInterval: 0 });
    await ephemeral.stop();
    expect(await stateOf(sdk, ephemeral.id)).toBe("gone");
    const bounded = await sdk.create({ ttlMinutes: 3, autoStopInterval: 0 });
    expect(Date.parse(bounded.autoDestroyAt!)).toBeLessThanOrEqual(Date.now() + 300);
    await waitFor("TTL", async () => (await stateOf(sdk, bounded.id)) === "gone");
    await waitFor("the busy sandbox's auto-stop", async () => (await stateOf(sdk, busy.id)) === "stopped");
    await busy.delete(60, true);
    expect(await emu.leftovers()).toEqual([]);
  });
});

describe("toolbox", () => {
  let sandbox: Sandbox;
  const toolbox = async () => {
    if (sandbox) return sandbox;
    const { sdk } = await start();
    sandbox = await sdk.create({ autoStopInterval: 0 });
    return sandbox;
  };

  it("process/execute: combined output, exit code, cwd, env; 408 at the timeout", async () => {
    const box = await toolbox();
    expect(await box.process.executeCommand("echo out; echo err >&2; exit 3")).toMatchObject({ exitCode: 3, result: "out\nerr\n" });
    expect((await box.process.executeCommand('pwd; printf %s "$A"', "/tmp", { A: "b c" })).result).toBe("/tmp\nb c");
    const started = Date.now();
    await expect(box.process.executeCommand("sleep 30", undefined, undefined, 1)).rejects.toBeInstanceOf(DaytonaTimeoutError);
    // A bound far from the alternative (a slow machine is not a failure): without the timeout the command runs 30 s.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("sessions: a background command's stdout and stderr stream apart and live over the log WebSocket; exit code and logs after", async () => {
    const box = await toolbox();
    await box.process.createSession("s1");
    const command = await box.process.executeSessionCommand("s1", { command: "echo first; sleep 1; echo second >&2; exit 4", runAsync: true });
    const seen: Array<{ stream: string; text: string; at: number }> = [];
    await box.process.getSessionCommandLogs(
      "s1",
      command.cmdId,
      (text) => seen.push({ stream: "out", text, at: Date.now() }),
      (text) => seen.push({ stream: "err", text, at: Date.now() }),
    );
    const done = Date.now();
    expect(
      seen
        .filter((s) => s.stream === "out")
        .map((s) => s.text)
        .join(""),
    ).toBe("first\n");
    expect(
      seen
        .filter((s) => s.stream === "err")
        .map((s) => s.text)
        .join(""),
    ).toBe("second\n");
    expect(done - seen[0]!.at).toBeGreaterThanOrEqual(700); // "first" arrived while the command ran
    expect(await box.process.getSessionCommand("s1", command.cmdId)).toMatchObject({ id: command.cmdId, exitCode: 4 });
    expect(await box.process.getSessionCommandLogs("s1", command.cmdId)).toMatchObject({ stdout: "first\n", stderr: "second\n" });
    const sync = await box.process.executeSessionCommand("s1", { command: "echo now; echo oops >&2; exit 2" });
    expect(sync).toMatchObject({ exitCode: 2, stdout: "now\n", stderr: "oops\n" });
    const endless = await box.process.executeSessionCommand("s1", { command: "sleep 300", runAsync: true });
    await box.process.deleteSession("s1"); // ends what still runs in it
    await expect(box.process.getSession("s1")).rejects.toBeInstanceOf(DaytonaNotFoundError);
    expect(endless.cmdId).toBeTruthy();
  });

  it("files: bulk upload (buffer and stream) and download, every byte value, parents made; a missing file is FILE_NOT_FOUND", async () => {
    const box = await toolbox();
    const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await box.fs.uploadFile(every, "/tmp/deep/down/every.bin");
    await box.fs.uploadFileStream(Readable.from([every, every]), "/home/sandbox/twice.bin");
    expect((await box.fs.downloadFile("/tmp/deep/down/every.bin")).equals(every)).toBe(true);
    expect((await box.fs.downloadFile("twice.bin")).equals(Buffer.concat([every, every]))).toBe(true); // relative to the work dir
    const results = await box.fs.downloadFiles([{ source: "/tmp/deep/down/every.bin" }, { source: "/tmp/none" }]);
    expect(results[0]?.error).toBeUndefined();
    expect(results[1]?.error).toMatch(/file not found/);
    await expect(box.fs.downloadFile("/tmp/none")).rejects.toBeInstanceOf(DaytonaFileNotFoundError);
  });
});

describe("close", () => {
  it("destroys every jail (no process left) and removes the state directory", async () => {
    const parent = mkdtempSync(join(tmpdir(), "dte-close-"));
    chmodSync(parent, 0o711); // a root backend's jails run as another uid, which must pass it
    try {
      const { emu, sdk } = await start({ stateParentDir: parent });
      const sandbox = await sdk.create({});
      await sandbox.process.executeCommand("nohup sleep 300 >/dev/null 2>&1 &");
      expect(readdirSync(parent)).toHaveLength(1);
      await emu.close();
      expect(readdirSync(parent)).toEqual([]);
      const processes = readdirSync("/proc")
        .filter((pid) => /^\d+$/.test(pid))
        .filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(parent);
          } catch {
            return false;
          }
        });
      expect(processes).toEqual([]);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
