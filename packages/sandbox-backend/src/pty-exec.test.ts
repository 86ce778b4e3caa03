// Commands on a pseudo-terminal in a jail (execOnPty), which the emulators serve their vendors' PTY
// APIs with: a terminal the program sees, echo, ^C, a resize as SIGWINCH, exit codes, signals.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execOnPty } from "./pty-exec.js";
import type { ExecHandle, Sandbox } from "./types.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
let sandbox: Sandbox;
beforeAll(async () => {
  world = startWorld();
  sandbox = await world.create({ id: "pty-exec" });
});
afterAll(async () => {
  await world?.close();
});

function screen(handle: ExecHandle) {
  let text = "";
  handle.subscribe({ stdout: 0 }, { onData: (_stream, data) => (text += data.toString("utf8")) });
  return {
    get text() {
      return text;
    },
    async until(marker: string | RegExp) {
      const deadline = Date.now() + 10_000;
      while (!(typeof marker === "string" ? text.includes(marker) : marker.test(text))) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${String(marker)} in ${JSON.stringify(text)}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
  };
}

describe("execOnPty", () => {
  it("gives the program a terminal of the asked size that echoes input, and reports its exit code", async () => {
    const pty = await execOnPty(sandbox, { argv: ["sh", "-c", 'tty >/dev/null && echo "tty $(stty size)"; printf "name? "; read n; echo "hi $n"; exit 5'], cols: 100, rows: 20 });
    const out = screen(pty.handle);
    await out.until("name? ");
    expect(out.text).toContain("tty 20 100");
    await pty.handle.write("zoë\r");
    expect(await pty.handle.exited).toMatchObject({ exitCode: 5 });
    await out.until("hi zoë");
    // The terminal echoed the typed line before the program answered.
    expect(out.text.indexOf("zoë")).toBeLessThan(out.text.indexOf("hi zoë"));
  });

  it("^C interrupts the program; a resize reaches it as SIGWINCH", async () => {
    const pty = await execOnPty(sandbox, { argv: ["sh", "-c", "trap 'echo \"winch $(stty size)\"' WINCH; echo ready; while :; do sleep 0.1; done"], cols: 80, rows: 24 });
    const out = screen(pty.handle);
    await out.until("ready");
    await pty.resize(132, 43);
    await out.until("winch 43 132");
    await pty.handle.write("\x03");
    expect((await pty.handle.exited).exitCode).toBe(130);
  });

  it("signals the program on the terminal, not only the wrapper", async () => {
    const pty = await execOnPty(sandbox, { argv: ["sh", "-c", "echo $$; exec sleep 300"], cols: 80, rows: 24 });
    const out = screen(pty.handle);
    await out.until(/\d+\r\n/);
    const pid = await pty.programPid();
    expect(out.text).toContain(String(pid));
    await pty.signal("SIGTERM");
    expect((await pty.handle.exited).exitCode).toBe(143);
    const left = await sandbox.exec({ script: `kill -0 ${pid} 2>/dev/null && echo alive || echo gone` });
    let said = "";
    await left.subscribe({ stdout: 0 }, { onData: (_s, d) => (said += d) }).done;
    expect(said.trim()).toBe("gone");
    expect((await sandbox.files.list("/tmp")).filter((f) => f.name.startsWith(".paperclip-pty."))).toEqual([]);
  });

  it("refuses a size it cannot set; 0 x 0 opens a terminal without a size (an SSH pty-req that names none)", async () => {
    await expect(execOnPty(sandbox, { argv: ["true"], cols: -1, rows: 24 })).rejects.toThrow(/cols must be a whole number from 0/);
    await expect(execOnPty(sandbox, { argv: ["true"], cols: 80, rows: 10_001 })).rejects.toThrow(/rows must be a whole number/);
    const pty = await execOnPty(sandbox, { argv: ["sh", "-c", 'echo "size $(stty size)"'], cols: 0, rows: 0 });
    const out = screen(pty.handle);
    expect((await pty.handle.exited).exitCode).toBe(0);
    await out.until("size 0 0");
    await expect(pty.resize(0, 24)).rejects.toThrow(/cols must be a whole number from 1/);
  });
});
