// A vendor's sandbox user (E2B's `user` with /home/user, a pod's runAsUser) and writable directories
// anywhere in the jail (a Kubernetes emptyDir), plus execve's own refusal of an over-long argument.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SandboxExecError, SandboxInputError } from "./errors.js";
import type { Sandbox } from "./types.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
beforeAll(() => {
  world = startWorld();
});
afterAll(async () => {
  await world?.close();
});

async function sh(sandbox: Sandbox, script: string): Promise<{ stdout: string; exitCode: number | null }> {
  let stdout = "";
  const exit = await sandbox.runner.run(script, { stdout: (chunk: Buffer) => (stdout += chunk), stderr: (chunk: Buffer) => (stdout += chunk) });
  return { stdout, exitCode: exit.exitCode };
}

describe("the sandbox user", () => {
  it("a named user with its own home: whoami, $HOME, a writable home and cache, no /home/sandbox", async () => {
    const sandbox = await world.create({ id: "user-e2b", user: { name: "user", home: "/home/user" } });
    const out = await sh(sandbox, 'whoami; id -u; echo "$HOME $XDG_CACHE_HOME"; cd ~ && touch kept && ls -d .cache && test ! -e /home/sandbox && echo no-default-home');
    expect(out.stdout.split("\n")).toEqual(["user", "1000", "/home/user /home/user/.cache", ".cache", "no-default-home", ""]);
    expect((await sandbox.readStoredFile("/home/user/kept"))?.length).toBe(0);
    // Kept across a cold restart.
    await sandbox.stop();
    await sandbox.start();
    expect((await sh(sandbox, "ls ~/kept")).stdout).toBe("/home/user/kept\n");
  });

  it("uid 0 is root in name only: no capability, the host tree stays read-only", async () => {
    const sandbox = await world.create({ id: "user-root", user: { uid: 0, gid: 0, home: "/root" } });
    const out = await sh(sandbox, "id -u; whoami; echo $HOME; touch /usr/x 2>&1 | head -1; touch ~/y && echo home-writable");
    expect(out.stdout).toMatch(/^0\nroot\n\/root\n.*Read-only file system.*\nhome-writable\n$/);
  });

  it("refuses a bad user naming the field", async () => {
    await expect(world.create({ user: { name: "Bad Name" } })).rejects.toThrow(SandboxInputError);
    await expect(world.create({ user: { uid: 70000 } })).rejects.toThrow("user.uid must be an integer in [0, 65533]");
    await expect(world.create({ user: { home: "/tmp" } })).rejects.toThrow(/user.home must not be/);
  });
});

describe("further writable directories (emptyDir)", () => {
  it("are empty at create, writable at any path, kept across stop and start; read-only ones refuse writes", async () => {
    const sandbox = await world.create({ id: "mounts", mounts: [{ path: "/data" }, { path: "/var/lib/app" }, { path: "/data/inner" }, { path: "/usr/share", readOnly: true }] });
    const out = await sh(
      sandbox,
      "ls -A /data; echo a > /data/a && echo b > /data/inner/b && echo c > /var/lib/app/c && stat -c %a /var/lib/app && cat /data/a /data/inner/b /var/lib/app/c; touch /usr/share/x 2>&1 | grep -c 'Read-only'",
    );
    expect(out.stdout).toBe("inner\n777\na\nb\nc\n1\n");
    await sandbox.stop();
    await sandbox.start();
    expect((await sh(sandbox, "cat /data/a /var/lib/app/c")).stdout).toBe("a\nc\n");
  });

  it("mounts naming one volume share its directory; a subPath binds a directory inside it", async () => {
    const sandbox = await world.create({
      id: "shared-volume",
      mounts: [
        { path: "/a", volume: "data" },
        { path: "/b", volume: "data" },
        { path: "/c", volume: "data", subPath: "inner/deep" },
      ],
    });
    const out = await sh(sandbox, "echo one > /a/x && cat /b/x && echo two > /c/y && cat /a/inner/deep/y");
    expect(out.stdout).toBe("one\ntwo\n");
    await expect(world.create({ mounts: [{ path: "/d", subPath: "../escape" }] })).rejects.toThrow("mounts[0].subPath must be a relative path without . or .. segments");
  });

  it("a mount point that would have to be made inside the read-only host tree is refused before anything starts", async () => {
    await expect(world.create({ id: "bad-mount", mounts: [{ path: "/usr/no-such-dir-here" }] })).rejects.toThrow(
      "mounts[0].path: /usr/no-such-dir-here does not exist in the sandbox's read-only tree (a mount point there must exist)",
    );
    expect(await world.backend.summary("bad-mount")).toBeNull();
    await expect(world.create({ mounts: [{ path: "/proc/x" }] })).rejects.toThrow(/mounts\[0\]\.path must not be \/ or under \/proc/);
    await expect(world.create({ mounts: [{ path: "relative" }] })).rejects.toThrow("mounts[0].path must be an absolute, normalized in-sandbox path");
  });
});

describe("execve's limits", () => {
  it("a single argument of 128 KiB or more is refused as the kernel refuses it: E2BIG, argument list too long", async () => {
    const sandbox = await world.create({ id: "e2big" });
    const error = await sandbox.exec({ argv: ["echo", "x".repeat(200 * 1024)] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxExecError);
    expect(error).toMatchObject({ code: "E2BIG", message: expect.stringContaining("argument list too long") });
    const fits = await sandbox.exec({ argv: ["sh", "-c", 'printf %s "$1" | wc -c', "sh", "y".repeat(100 * 1024)] });
    const out = await fits.read("stdout", 0);
    await fits.exited;
    expect((await fits.read("stdout", 0)).data.toString().trim() || out.data.toString().trim()).toBe(String(100 * 1024));
  });
});
