// A sandbox user named as a vendor's image names it: `coder` with its home at /home/coder.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
beforeAll(() => {
  world = startWorld();
});
afterAll(async () => {
  await world?.close();
});

async function run(sandbox: Awaited<ReturnType<World["create"]>>, script: string): Promise<string> {
  const handle = await sandbox.exec({ script });
  await handle.exited;
  return (await handle.read("stdout")).data.toString();
}

describe("the sandbox user", () => {
  it("is `sandbox` in /home/sandbox unless the create names another", async () => {
    const sandbox = await world.create({ id: "default-user" });
    expect(sandbox.user).toEqual({ name: "sandbox", home: "/home/sandbox" });
    expect(await run(sandbox, 'echo "$(id -un) $HOME $USER"')).toBe("sandbox /home/sandbox sandbox\n");
  });

  it("named coder: whoami, $HOME, ~ and a writable /home/coder, kept across stop and start", async () => {
    const sandbox = await world.create({ id: "coder-user", user: "coder" });
    expect(sandbox.user).toEqual({ name: "coder", home: "/home/coder" });
    expect(await run(sandbox, 'cd ~ && pwd -P && echo "$(whoami) $HOME $XDG_CACHE_HOME" && echo kept > /home/coder/f && test ! -e /home/sandbox && echo no-sandbox-home')).toBe(
      "/home/coder\ncoder /home/coder /home/coder/.cache\nno-sandbox-home\n",
    );
    await sandbox.stop();
    expect((await sandbox.readStoredFile("/home/coder/f"))?.toString()).toBe("kept\n");
    await sandbox.start();
    expect(await run(sandbox, "id -un; cat ~/f")).toBe("coder\nkept\n");
  });

  it("refuses a name that is no login name, root and nobody", async () => {
    for (const user of ["root", "nobody", "Coder", "a b", "../x", "x".repeat(33)]) {
      await expect(world.create({ user })).rejects.toThrow(/user must be a login name/);
    }
  });
});
