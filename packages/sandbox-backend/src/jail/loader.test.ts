import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { elfInterpreter, resolveInTree, supervisorLoader } from "./loader.js";

describe("the supervisor's loader", () => {
  it("reads node's program interpreter from its ELF header", () => {
    const interpreter = elfInterpreter(fs.realpathSync(process.execPath));
    expect(interpreter).toMatch(/^\/.*ld-(linux|musl)[^/]*\.so/);
    expect(supervisorLoader(fs.realpathSync(process.execPath), "/")).toBe(fs.realpathSync(interpreter!));
  });

  it("is null for a file that is not a dynamic ELF binary", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "loader-"));
    try {
      fs.writeFileSync(path.join(dir, "script"), "#!/bin/sh\necho hi\n");
      expect(elfInterpreter(path.join(dir, "script"))).toBeNull();
      expect(supervisorLoader(path.join(dir, "script"), "/")).toBeNull();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("resolves links inside a rootfs against the rootfs, never the host", () => {
    const rootfs = fs.mkdtempSync(path.join(os.tmpdir(), "loader-rootfs-"));
    try {
      fs.mkdirSync(path.join(rootfs, "usr/lib64"), { recursive: true });
      fs.writeFileSync(path.join(rootfs, "usr/lib64/ld-linux-x86-64.so.2"), "loader");
      fs.symlinkSync("/usr/lib64", path.join(rootfs, "lib64"));
      expect(resolveInTree(rootfs, "/lib64/ld-linux-x86-64.so.2")).toBe(path.join(rootfs, "usr/lib64/ld-linux-x86-64.so.2"));
      fs.mkdirSync(path.join(rootfs, "etc"));
      fs.writeFileSync(path.join(rootfs, "etc/passwd"), "the rootfs's own");
      fs.symlinkSync("../../../../../etc/passwd", path.join(rootfs, "usr/lib64/escape"));
      expect(resolveInTree(rootfs, "/lib64/escape")).toBe(path.join(rootfs, "etc/passwd"));
      fs.symlinkSync("loop", path.join(rootfs, "loop"));
      expect(resolveInTree(rootfs, "/loop/x")).toBeNull();
    } finally {
      fs.rmSync(rootfs, { recursive: true, force: true });
    }
  });
});
