// The runner over a fake boxd API: what is sent per command, and the retry that never runs a command twice.
import { describe, expect, it } from "vitest";
import { ProviderApiError } from "@paperclip-sandbox/kit";
import type { BoxdApi, ExecCall, ExecOutput } from "./api.js";
import { BOXD_INLINE_STDIN_BYTES, createBoxdRunner } from "./transport.js";

const unavailable = () =>
  new ProviderApiError({ vendor: "boxd", operation: "Exec", status: 0, code: "unavailable", detail: "connection reset", retryable: true, gone: false, mayHaveTakenEffect: true });

/** A fake machine: each Exec is answered by `answer(command, n)` (an exit code, or an error). */
function fakeApi(answer: (command: string, n: number, output: ExecOutput) => Promise<number> | number) {
  const commands: string[] = [];
  const files: Array<{ path: string; mode: number; bytes: number }> = [];
  const api = {
    redact: (t: string) => t,
    async exec(_id: string, command: string, output: ExecOutput): Promise<ExecCall> {
      commands.push(command);
      const n = commands.length;
      const exited = Promise.resolve()
        .then(() => answer(command, n, output))
        .then((exitCode) => ({ exitCode, cancelled: false }));
      exited.catch(() => undefined);
      return { write: async () => undefined, end: () => undefined, cancel: () => undefined, exited };
    },
    async writeFile(_id: string, path: string, data: Buffer, mode: number) {
      files.push({ path, mode, bytes: data.length });
    },
  } as unknown as BoxdApi;
  return { api, commands, files };
}

const target = (api: BoxdApi) => ({ api, id: "vm-1", agent: { legacy: false } });

describe("boxd runner", () => {
  it("one Exec per command: the script itself, small stdin inline; larger stdin one WriteFile (0600) more", async () => {
    const fake = fakeApi(() => 0);
    const runner = createBoxdRunner(target(fake.api));
    await runner.run("echo hi", {});
    expect(fake.commands).toHaveLength(1);
    expect(fake.commands[0]).toContain("echo hi");
    await runner.run("cat", { stdin: "small" });
    expect(fake.commands).toHaveLength(2);
    expect(fake.commands[1]).toContain(Buffer.from("small").toString("base64"));
    await runner.run("cat", { stdin: Buffer.alloc(BOXD_INLINE_STDIN_BYTES + 1, 97) });
    expect(fake.commands).toHaveLength(3);
    expect(fake.files).toEqual([{ path: expect.stringMatching(/^\/tmp\/\.paperclip-stdin\.[0-9a-f]{24}\/stdin$/), mode: 0o600, bytes: BOXD_INLINE_STDIN_BYTES + 1 }]);
  });

  it("a call that fails before the command started is sent again (its nonce is not in the start log)", async () => {
    const fake = fakeApi((command, n) => {
      if (n === 1) throw unavailable();
      if (command.startsWith("grep -qxF")) return 1; // not started
      return 0;
    });
    const exit = await createBoxdRunner(target(fake.api)).run("echo once", {});
    expect(exit.exitCode).toBe(0);
    expect(fake.commands.map((c) => (c.startsWith("grep") ? "probe" : "command"))).toEqual(["command", "probe", "command"]);
    expect(fake.commands[2]).toBe(fake.commands[0]);
  });

  it("a call that failed after the command started is never sent again: the failure is reported", async () => {
    const fake = fakeApi((command, n) => {
      if (n === 1) throw unavailable();
      if (command.startsWith("grep -qxF")) return 0; // the nonce is logged: it ran
      return 0;
    });
    await expect(createBoxdRunner(target(fake.api)).run("rm -rf ./once-only", {})).rejects.toMatchObject({ code: "unavailable" });
    expect(fake.commands.filter((c) => c.includes("once-only"))).toHaveLength(1);
  });

  it("a call that failed after output arrived is not retried", async () => {
    const fake = fakeApi(async (_command, n, output) => {
      if (n === 1) {
        await output.stdout(Buffer.from("partial"));
        throw unavailable();
      }
      return 0;
    });
    await expect(createBoxdRunner(target(fake.api)).run("echo partial; sleep 9", {})).rejects.toMatchObject({ code: "unavailable" });
    expect(fake.commands).toHaveLength(1);
  });

  it("a final refusal (FAILED_PRECONDITION) is reported at once", async () => {
    const fake = fakeApi(() => {
      throw new ProviderApiError({
        vendor: "boxd",
        operation: "Exec",
        status: 0,
        code: "failed_precondition",
        detail: "machine x is stopped",
        retryable: false,
        gone: false,
        mayHaveTakenEffect: true,
      });
    });
    await expect(createBoxdRunner(target(fake.api)).run("true", {})).rejects.toMatchObject({ code: "failed_precondition" });
    expect(fake.commands).toHaveLength(1);
  });
});
