// Caller-chosen ids: validated with an error naming the rule; any valid length fits the socket limit.
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkSandboxId, SANDBOX_ID_MAX } from "./ids.js";
import { createSandboxBackend } from "./backend.js";
import { MAX_SOCKET_PATH, sandboxLayout } from "./store/layout.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
beforeAll(() => {
  world = startWorld();
});
afterAll(async () => {
  await world?.close();
});

const LONG_ID = `k8s-pod.${"a".repeat(SANDBOX_ID_MAX - 12)}-end`;

describe("sandbox ids", () => {
  it("accepts a caller-chosen id, up to the longest allowed, with sockets still under the Unix limit", async () => {
    expect(LONG_ID).toHaveLength(SANDBOX_ID_MAX);
    const sandbox = await world.create({ id: LONG_ID, labels: { vendor: "k8s" } });
    expect(sandbox.id).toBe(LONG_ID);
    const layout = sandboxLayout(world.stateDir, LONG_ID);
    expect(Buffer.byteLength(layout.socket)).toBeLessThanOrEqual(MAX_SOCKET_PATH);
    expect(fs.existsSync(layout.socket)).toBe(true);
    const handle = await sandbox.exec({ argv: ["echo", "long id ok"] });
    await handle.exited;
    expect((await handle.read("stdout")).data.toString()).toBe("long id ok\n");
    expect((await world.backend.list({ labels: { vendor: "k8s" } })).map((entry) => entry.id)).toEqual([LONG_ID]);
    const generated = await world.create();
    expect(generated.id).toMatch(/^sbx-[a-z0-9]{16}$/);
  });

  it("refuses an id that is taken, without touching the sandbox that has it", async () => {
    const first = await world.create({ id: "taken" });
    await expect(world.create({ id: "taken" })).rejects.toMatchObject({ name: "SandboxExistsError", code: "EEXIST" });
    expect(first.state).toBe("running");
  });

  it("refuses an invalid id with an error naming the rule", async () => {
    for (const bad of ["", "../escape", "a/b", ".hidden", "-flag", "with space", "x".repeat(SANDBOX_ID_MAX + 1), "ünïcode"]) {
      expect(() => checkSandboxId(bad)).toThrow(/is not a valid sandbox id: use 1-253 characters from A-Z a-z 0-9 \. _ -, starting with a letter or digit/);
      await expect(world.backend.create({ id: bad, ttlMs: 1000 })).rejects.toMatchObject({ name: "SandboxInputError" });
    }
    await expect(world.backend.get("../x")).rejects.toThrow(/not a valid sandbox id/);
  });

  it("lets two backends hold the same id, each sandbox with cgroups of its own", async () => {
    // Cgroups are machine-wide: named by the id alone, the second sandbox would join the first's
    // (an unprivileged backend could not even write to them), and destroying the first would find
    // its cgroups busy with the second's processes.
    const other = startWorld();
    try {
      const names = [world.stateDir, other.stateDir].map((stateDir) => sandboxLayout(stateDir, "same-id").cgroupName);
      expect(names[0]).not.toBe(names[1]);
      expect(names[0]).toMatch(/^paperclip-sbx-[0-9a-f]{16}$/);
      const first = await world.create({ id: "same-id" });
      const second = await other.create({ id: "same-id" });
      const say = async (sandbox: typeof first, text: string) => {
        const handle = await sandbox.exec({ argv: ["echo", text] });
        await handle.exited;
        return (await handle.read("stdout")).data.toString();
      };
      expect(await say(first, "one")).toBe("one\n");
      expect(await say(second, "two")).toBe("two\n");
      await world.backend.destroy("same-id");
      expect(await say(second, "still")).toBe("still\n");
    } finally {
      await other.close();
    }
  });

  it("refuses a state dir whose socket paths would not fit", () => {
    expect(() => createSandboxBackend({ stateDir: `/tmp/${"d".repeat(80)}` })).toThrow(/stateDir is too long: sandbox sockets would be \d+ bytes, over the 107-byte Unix socket limit/);
  });
});
