import { existsSync, statSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runEmulator } from "./emulator.js";

describe("kit.backend(): the jails' bootstrap every emulator shares", () => {
  it("makes a short state directory (0711 under root), runs jails in it, and removes it on close", async () => {
    let stateDir = "";
    let root = "";
    const emu = await runEmulator({
      name: "jails",
      description: "one jail",
      async start(kit) {
        const started = await kit.backend({ stateSubdir: "b" });
        stateDir = started.stateDir;
        root = started.root;
        const jail = await started.backend.create({ id: "sbx-1", ttlMs: 60_000 });
        const out: Buffer[] = [];
        await jail.runner.run("echo hi", { stdout: (chunk: Buffer) => out.push(chunk), stderr: () => undefined });
        expect(Buffer.concat(out).toString()).toBe("hi\n");
        return { url: "http://127.0.0.1:9", credentials: {}, close: () => started.backend.destroy("sbx-1") };
      },
    });
    expect(root).toMatch(/^\/tmp\/jails-[A-Za-z0-9]{6}$/);
    expect(stateDir).toBe(`${root}/b`);
    expect(existsSync(`${stateDir}/leases/sbx-1`)).toBe(true);
    if (process.getuid?.() === 0) expect(statSync(root).mode & 0o777).toBe(0o711);
    await emu.close();
    expect(existsSync(root)).toBe(false);
  });
});
