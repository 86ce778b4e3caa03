// Exec handles: output kept in the supervisor, so a command outlives (or, when not detached, ends
// with) the connection that started it, and any later connection can attach by pid.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SandboxExecError } from "./errors.js";
import type { Sandbox } from "./types.js";
import { eventually, startWorld, type World } from "./__fixtures__/world.js";

let world: World;
let sandbox: Sandbox;
beforeAll(async () => {
  world = startWorld();
  sandbox = await world.create({ id: "exec-handles" });
});
afterAll(async () => {
  await world?.close();
});

const processOf = async (target: Sandbox, pid: number) => (await target.processes()).find((entry) => entry.pid === pid);

describe("exec handles", () => {
  it("a detached exec outlives its client and worker; a later worker re-attaches by pid and reads its output from offset 0", async () => {
    const first = world.newBackend();
    const started = await (await first.get(sandbox.id))!.exec({
      script: 'echo first; read line; echo "got $line"; echo to-stderr >&2',
      detached: true,
      stdin: true,
    });
    const pid = started.pid;
    // The client goes away, then its whole worker.
    started.close();
    await first.close();

    const later = world.newBackend();
    const adopted = (await later.get(sandbox.id))!;
    expect(await processOf(adopted, pid)).toMatchObject({ running: true, detached: true, stdinOpen: true });
    const attached = await adopted.attach(pid);
    expect(attached).not.toBeNull();
    await attached!.write("hello\n");
    await attached!.closeStdin();
    expect(await attached!.exited).toEqual({ exitCode: 0, signal: null, timedOut: false });
    const stdout = await attached!.read("stdout", 0);
    expect(stdout.data.toString()).toBe("first\ngot hello\n");
    expect(stdout).toMatchObject({ offset: 0, nextOffset: 16, ended: true, dropped: 0 });
    expect((await attached!.read("stderr", 0)).data.toString()).toBe("to-stderr\n");
    // Still readable after its exit, from a fresh attach too, until it is reaped.
    const afterExit = await adopted.attach(pid);
    expect(await afterExit!.exited).toEqual({ exitCode: 0, signal: null, timedOut: false });
    expect((await afterExit!.read("stdout", 6)).data.toString()).toBe("got hello\n");
    await adopted.reap(pid);
    expect(await adopted.attach(pid)).toBeNull();
  });

  it("a plain exec ends when the connection that started it is lost", async () => {
    const handle = await sandbox.exec({ script: "sleep 30" });
    expect(await processOf(sandbox, handle.pid)).toMatchObject({ running: true, detached: false });
    handle.close();
    const ended = await eventually(
      () => processOf(sandbox, handle.pid),
      (entry) => entry?.running === false,
    );
    expect(ended?.exit).toEqual({ exitCode: null, signal: "SIGTERM", timedOut: false });
  });

  it("a subscription delivers from an offset, follows live output and ends with the exit", async () => {
    const handle = await sandbox.exec({ script: "for i in 1 2 3; do echo line$i; sleep 0.1; done; echo err >&2", detached: true });
    const seen: string[] = [];
    const ends: string[] = [];
    const all = handle.subscribe(
      { stdout: 0, stderr: 0 },
      {
        onData: (stream, data, offset) => seen.push(`${stream}@${offset}:${data.toString()}`),
        onEnd: (stream, offset) => ends.push(`${stream}@${offset}`),
      },
    );
    expect(await all.done).toEqual({ exitCode: 0, signal: null, timedOut: false });
    expect(
      seen
        .filter((entry) => entry.startsWith("stdout"))
        .map((entry) => entry.replace(/^stdout@\d+:/, ""))
        .join(""),
    ).toBe("line1\nline2\nline3\n");
    expect(ends.sort()).toEqual(["stderr@4", "stdout@18"]);
    // From an offset, after the exit: only the rest, and done at once.
    let tail = "";
    const late = handle.subscribe({ stdout: 12 }, { onData: (_stream, data) => (tail += data.toString()) });
    expect(await late.done).toEqual({ exitCode: 0, signal: null, timedOut: false });
    expect(tail).toBe("line3\n");
  });

  it("keeps output within its bound: older bytes are dropped and readers are told where the kept bytes start", async () => {
    const handle = await sandbox.exec({ script: "head -c 5000 /dev/zero | tr '\\0' a; printf end", outputLimitBytes: 1000, detached: true });
    await handle.exited;
    const read = await handle.read("stdout", 0);
    expect(read).toMatchObject({ offset: 4003, nextOffset: 5003, dropped: 4003, ended: true });
    expect(read.data.toString().endsWith("aaaend")).toBe(true);
    const gaps: Array<[number, number]> = [];
    let received = 0;
    await handle.subscribe({ stdout: 0 }, { onData: (_s, data) => (received += data.length), onGap: (_s, from, to) => gaps.push([from, to]) }).done;
    expect(gaps).toEqual([[0, 4003]]);
    expect(received).toBe(1000);
  });

  it("ends a command at its timeout and reports timedOut; signals reach the whole group", async () => {
    const timed = await sandbox.exec({ script: "sleep 30", timeoutMs: 300 });
    expect(await timed.exited).toEqual({ exitCode: null, signal: "SIGTERM", timedOut: true });

    const group = await sandbox.exec({ script: "sleep 300 & echo $!; wait", detached: true });
    const child = Number(
      (
        await eventually(
          () => group.read("stdout", 0),
          (read) => read.data.length > 0,
        )
      ).data.toString(),
    );
    await group.signal("SIGKILL", { group: true });
    expect((await group.exited).signal).toBe("SIGKILL");
    const check = await sandbox.exec({ argv: ["sh", "-c", `kill -0 ${child} 2>/dev/null && echo alive || echo gone`] });
    await check.exited;
    expect((await check.read("stdout")).data.toString()).toBe("gone\n");
  });

  it("runs argv without a shell, in cwd, with env; refuses a missing cwd or command with a coded error", async () => {
    const handle = await sandbox.exec({ argv: ["sh", "-c", 'pwd; echo "$GREETING"'], cwd: "/tmp", env: { GREETING: "hi there" } });
    await handle.exited;
    expect((await handle.read("stdout")).data.toString()).toBe("/tmp\nhi there\n");
    await expect(sandbox.exec({ argv: ["true"], cwd: "/nonexistent" })).rejects.toMatchObject({
      name: "SandboxExecError",
      code: "ENOENT",
      message: expect.stringMatching(/cwd \/nonexistent does not exist/),
    });
    await expect(sandbox.exec({ argv: ["/no/such/command"] })).rejects.toBeInstanceOf(SandboxExecError);
    await expect(sandbox.exec({ script: "true", argv: ["true"] })).rejects.toThrow(/exactly one of argv and script/);
  });
});
