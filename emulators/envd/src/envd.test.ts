// envd as the real SDKs use it: the process service (Start stream, Connect by pid, stdin, signals,
// list, the Connect deadline) and the filesystem (/files upload and download, Connect filesystem).
import http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as e2b from "e2b";
import * as novita from "novita-sandbox";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, SANDBOX_HOME } from "./index.js";

const emu = await runEmulator(emulator);
const opts = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sandboxUrl: emu.url };
let sbx: e2b.Sandbox;
let nov: novita.Sandbox;
beforeAll(async () => {
  [sbx, nov] = await Promise.all([e2b.Sandbox.create("base", opts), novita.Sandbox.create("base", opts)]);
});
afterAll(async () => {
  await Promise.allSettled([sbx?.kill(), novita.Sandbox.kill(nov?.sandboxId ?? "none", opts)]);
  expect(await emu.leftovers()).toEqual([]);
  await emu.close();
});

/** The raw Start stream of the SDK's process client, bytes kept (what the providers use). */
function rawStart(sandbox: { commands: object }, argv: string[], options: { stdin?: boolean; timeoutMs?: number } = {}) {
  const rpc = (sandbox.commands as { rpc: { start(req: unknown, opts: unknown): AsyncIterable<{ event?: { event: { case: string; value: any } } }> } }).rpc;
  return rpc.start({ process: { cmd: argv[0], args: argv.slice(1), envs: {} }, stdin: options.stdin ?? false }, options.timeoutMs ? { timeoutMs: options.timeoutMs } : {});
}

/**
 * envd's StreamInput on the wire (no SDK sends it: their fetch transport refuses request streams):
 * one POST whose body is Connect envelopes, written as the test goes; `answer` is the response.
 */
function streamInput(sandbox: e2b.Sandbox) {
  const token = (sandbox as unknown as { envdAccessToken?: string }).envdAccessToken;
  const request = http.request(new URL("/process.Process/StreamInput", emu.url), {
    method: "POST",
    headers: {
      "content-type": "application/connect+json",
      "connect-protocol-version": "1",
      "E2b-Sandbox-Id": sandbox.sandboxId,
      "E2b-Sandbox-Port": "49983",
      ...(token ? { "X-Access-Token": token } : {}),
    },
  });
  const answer = new Promise<{ status: number; frames: { flags: number; message: unknown }[] }>((resolve, reject) => {
    request.on("error", reject);
    request.on("response", (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => {
        const body = Buffer.concat(chunks);
        const frames: { flags: number; message: unknown }[] = [];
        for (let at = 0; at + 5 <= body.length; at += 5 + body.readUInt32BE(at + 1)) {
          frames.push({ flags: body[at]!, message: JSON.parse(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1)).toString("utf8")) });
        }
        resolve({ status: response.statusCode ?? 0, frames });
      });
    });
  });
  answer.catch(() => undefined);
  const send = (event: object) => {
    const payload = Buffer.from(JSON.stringify(event));
    const header = Buffer.alloc(5);
    header.writeUInt32BE(payload.length, 1);
    request.write(Buffer.concat([header, payload]));
  };
  return { send, end: () => request.end(), answer };
}

describe("process service", () => {
  it("Start streams a start event first, then stdout and stderr apart, then the end with the exit code", async () => {
    const events: string[] = [];
    for await (const response of rawStart(sbx, ["/bin/sh", "-c", "printf out; printf err >&2; exit 3"])) {
      const e = response.event!.event;
      if (e.case === "data") events.push(`${e.value.output.case}:${Buffer.from(e.value.output.value).toString()}`);
      else if (e.case === "end") events.push(`end:${e.value.exitCode}:${e.value.status}`);
      else events.push(e.case);
    }
    expect(events[0]).toBe("start");
    expect(events.slice(1).sort()).toEqual(["end:3:exit status 3", "stderr:err", "stdout:out"]);
    expect(events.at(-1)).toBe("end:3:exit status 3");
  });

  it("output bytes arrive unchanged (base64 in the JSON codec), in pieces of at most 32 KiB", async () => {
    const chunks: Buffer[] = [];
    for await (const response of rawStart(sbx, ["/bin/sh", "-c", "head -c 200000 /dev/urandom > /tmp/r.bin; cat /tmp/r.bin"])) {
      const e = response.event!.event;
      if (e.case === "data" && e.value.output.case === "stdout") chunks.push(Buffer.from(e.value.output.value));
    }
    expect(Math.max(...chunks.map((c) => c.length))).toBeLessThanOrEqual(32 * 1024);
    const whole = Buffer.concat(chunks);
    expect(whole.length).toBe(200_000);
    const stored = Buffer.from(await sbx.files.read("/tmp/r.bin", { format: "bytes" }));
    expect(whole.equals(stored)).toBe(true);
  });

  it("a reader slower than the process still gets every byte", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => void warnings.push(warning.name);
    process.on("warning", onWarning);
    let total = 0;
    let events = 0;
    try {
      // 6 MiB at once, within the jail's 8 MiB output buffer.
      for await (const response of rawStart(sbx, ["/bin/sh", "-c", "head -c 6291456 /dev/zero"])) {
        const e = response.event!.event;
        if (e.case !== "data") continue;
        total += Buffer.from(e.value.output.value).length;
        if (++events % 16 === 0) await sleep(5);
      }
    } finally {
      process.off("warning", onWarning);
    }
    expect(total).toBe(6 * 1024 * 1024);
    expect(warnings).not.toContain("MaxListenersExceededWarning");
  });

  it("stdin through SendInput and CloseStdin; a process outlives its stream and Connect re-attaches by pid", async () => {
    const handle = await sbx.commands.run("cat; echo closed", { background: true, stdin: true });
    await handle.sendStdin("first\n");
    await handle.disconnect();
    await sleep(100);
    const seen: string[] = [];
    const attached = await sbx.commands.connect(handle.pid, { onStdout: (s) => void seen.push(s) });
    await sbx.commands.sendStdin(handle.pid, "second\n");
    await sbx.commands.closeStdin(handle.pid);
    const result = await attached.wait();
    // Attached later: only what came after (as envd's multiplexer forks).
    expect(result.stdout).toBe("second\nclosed\n");
    expect(seen.join("")).toBe("second\nclosed\n");
  });

  it("List shows running processes with their config; SendSignal ends one (pid only); an unknown pid is not_found", async () => {
    const handle = await sbx.commands.run("sleep 30", { background: true, envs: { MARK: "x" }, cwd: "/tmp" });
    const listed = (await sbx.commands.list()).find((p) => p.pid === handle.pid);
    expect(listed).toMatchObject({ cmd: "/bin/bash", args: ["-l", "-c", "sleep 30"], envs: { MARK: "x" }, cwd: "/tmp" });
    expect(await sbx.commands.kill(handle.pid)).toBe(true);
    await expect(handle.wait()).rejects.toMatchObject({ exitCode: -1, error: "signal: killed" });
    expect(await sbx.commands.kill(handle.pid)).toBe(false);
  });

  it("the Connect-Timeout-Ms deadline kills the process and ends the stream with deadline_exceeded", async () => {
    await expect(sbx.commands.run("echo $$ > /tmp/deadline.pid; sleep 30", { timeoutMs: 500 })).rejects.toMatchObject({ name: "TimeoutError", message: expect.stringContaining("deadline_exceeded") });
    // The kill goes out as the stream ends: allow it a moment to land.
    const alive = await sbx.commands.run(
      'i=0; while kill -0 "$(cat /tmp/deadline.pid)" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done; kill -0 "$(cat /tmp/deadline.pid)" 2>/dev/null && echo alive || echo gone',
    );
    expect(alive.stdout).toBe("gone\n");
  });

  it("a missing cwd is invalid_argument; processes start in the user's home with HOME, USER and the sandbox env", async () => {
    await expect(sbx.commands.run("true", { cwd: "/no/such/dir" })).rejects.toMatchObject({ name: "InvalidArgumentError", message: expect.stringContaining("cwd '/no/such/dir' does not exist") });
    const env = await sbx.commands.run('pwd; echo "$HOME $USER"');
    expect(env.stdout).toBe(`${SANDBOX_HOME}\n${SANDBOX_HOME} user\n`);
  });

  it("the sandbox user is E2B's `user` with a writable /home/user, the path clients write to", async () => {
    const who = await sbx.commands.run("whoami; id -u; pwd; echo $HOME; touch /home/user/made && ls /home/user/made");
    expect(who.stdout).toBe("user\n1000\n/home/user\n/home/user\n/home/user/made\n");
    await sbx.files.write("/home/user/project/notes.txt", "kept");
    expect(await sbx.files.read("project/notes.txt")).toBe("kept"); // relative: from the home
    expect((await sbx.files.getInfo("/home/user/project/notes.txt")).owner).toBe("user");
  });

  it("an argument over Linux's per-argument limit fails as execve does: argument list too long (E2BIG)", async () => {
    const huge = `echo ${"x".repeat(200 * 1024)}`;
    await expect(sbx.commands.run(huge)).rejects.toMatchObject({ name: "InvalidArgumentError", message: expect.stringContaining("fork/exec /bin/sh: argument list too long") });
    // Just under the limit still runs.
    expect((await sbx.commands.run(`printf %s ${"y".repeat(100 * 1024)} | wc -c`)).stdout).toBe(`${100 * 1024}\n`);
  });

  it("refuses envd calls without the sandbox's access token", async () => {
    const response = await fetch(`${emu.url}/process.Process/List`, {
      method: "POST",
      headers: { "content-type": "application/json", "e2b-sandbox-id": sbx.sandboxId, "x-access-token": "wrong" },
      body: "{}",
    });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ code: "unauthenticated" });
  });

  it("Novita's SDK drives the same service (its own sandbox headers)", async () => {
    const out = await nov.commands.run("echo novita; echo err >&2");
    expect(out).toMatchObject({ exitCode: 0, stdout: "novita\n", stderr: "err\n" });
    const bg = await nov.commands.run("read line; echo got $line", { background: true, stdin: true });
    await nov.commands.sendStdin(bg.pid, "x\n");
    expect((await bg.wait()).stdout).toBe("got x\n");
  });

  it("StreamInput writes each data event as it arrives, before its stream ends; it answers at the end and stdin stays open", async () => {
    let out = "";
    const handle = await sbx.commands.run("cat; echo closed", { background: true, stdin: true, onStdout: (data) => void (out += data) });
    const input = streamInput(sbx);
    input.send({ start: { process: { pid: handle.pid } } });
    input.send({ data: { input: { stdin: Buffer.from("one\n").toString("base64") } } });
    input.send({ keepalive: {} });
    // The request is still open: the process has the bytes already.
    await vi.waitFor(() => expect(out).toBe("one\n"), { timeout: 20_000, interval: 20 });
    input.send({ data: { input: { stdin: Buffer.from("two\n").toString("base64") } } });
    input.end();
    const answer = await input.answer;
    expect(answer.status).toBe(200);
    expect(answer.frames).toEqual([
      { flags: 0, message: {} },
      { flags: 2, message: {} },
    ]);
    await handle.sendStdin("three\n");
    await handle.closeStdin();
    expect((await handle.wait()).stdout).toBe("one\ntwo\nthree\nclosed\n");
  });

  it("StreamInput for a process that does not exist ends with not_found", async () => {
    const input = streamInput(sbx);
    input.send({ start: { process: { pid: 987654 } } });
    input.end();
    const answer = await input.answer;
    expect(answer.status).toBe(200);
    expect(answer.frames).toEqual([{ flags: 2, message: { error: { code: "not_found", message: "process with pid 987654 not found" } } }]);
  });
});

describe("files", () => {
  it("uploads multipart (one or many files) and octet-stream, downloads the bytes, 404 for a missing file", async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await sbx.files.write("/tmp/one.bin", new Blob([bytes]));
    expect(Buffer.from(await sbx.files.read("/tmp/one.bin", { format: "bytes" })).equals(bytes)).toBe(true);
    await sbx.files.write([
      { path: "/tmp/many/a.txt", data: "a" },
      { path: "rel/b.txt", data: "b" },
    ]);
    expect(await sbx.files.read("/tmp/many/a.txt")).toBe("a");
    expect(await sbx.files.read(`${SANDBOX_HOME}/rel/b.txt`)).toBe("b");
    // A ReadableStream goes as one streamed octet-stream request.
    const mark = emu.requests.mark();
    await sbx.files.write("/tmp/streamed.bin", new Blob([bytes]).stream());
    await emu.requests.idle();
    expect(emu.requests.list({ since: mark, route: "/files" })[0]!.headers["content-type"]).toBe("application/octet-stream");
    expect(Buffer.from(await sbx.files.read("/tmp/streamed.bin", { format: "bytes" })).equals(bytes)).toBe(true);
    await expect(sbx.files.read("/tmp/none.txt")).rejects.toMatchObject({ name: "FileNotFoundError" });
  });

  it("filesystem service: list, stat (exists), makeDir (already exists), rename, remove", async () => {
    await sbx.files.write("/tmp/fs/x.txt", "x");
    expect(await sbx.files.makeDir("/tmp/fs/sub")).toBe(true);
    expect(await sbx.files.makeDir("/tmp/fs/sub")).toBe(false);
    await sbx.commands.run("ln -s x.txt /tmp/fs/link");
    const listed = await sbx.files.list("/tmp/fs");
    expect(listed.map((e) => `${e.name}:${e.type}`).sort()).toEqual(["link:symlink", "sub:dir", "x.txt:file"]);
    expect(await sbx.files.exists("/tmp/fs/x.txt")).toBe(true);
    expect((await sbx.files.getInfo("/tmp/fs/x.txt")).size).toBe(1);
    await sbx.files.rename("/tmp/fs/x.txt", "/tmp/fs/y.txt");
    expect(await sbx.files.exists("/tmp/fs/x.txt")).toBe(false);
    await sbx.files.remove("/tmp/fs");
    expect(await sbx.files.exists("/tmp/fs")).toBe(false);
  });

  it("Novita's older schema gets no symlink type (its SDK drops such entries)", async () => {
    await nov.files.write("/tmp/nfs/x.txt", "x");
    await nov.commands.run("ln -s x.txt /tmp/nfs/link");
    const listed = await nov.files.list("/tmp/nfs");
    expect(listed.map((e) => e.name)).toEqual(["x.txt"]);
    expect(await nov.files.read("/tmp/nfs/x.txt")).toBe("x");
  });
});
