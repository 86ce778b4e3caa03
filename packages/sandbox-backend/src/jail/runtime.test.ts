import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unreachableBy } from "./host-user.js";
import { createJailRuntime } from "./runtime.js";

const user = { uid: 2_000_000_000, gid: 2_000_000_000 };
let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "runtime-"));
  fs.chmodSync(dir, 0o711);
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("what the jails of a root worker can reach", () => {
  it("names the directory that stops the jail's host user", () => {
    const hidden = path.join(dir, "hidden");
    fs.mkdirSync(path.join(hidden, "inner"), { recursive: true, mode: 0o700 });
    fs.chmodSync(hidden, 0o700);
    expect(unreachableBy(path.join(hidden, "inner"), user)).toBe(`${hidden} (mode 0700)`);
    fs.chmodSync(hidden, 0o711);
    expect(unreachableBy(path.join(hidden, "inner"), user)).toBe(`${path.join(hidden, "inner")} (mode 0700)`);
    expect(unreachableBy("/usr/bin", user)).toBeNull();
  });

  it.skipIf(process.getuid?.() !== 0)("binds a copy of a node binary the jail's host user cannot reach, made once", async () => {
    const hidden = fs.mkdtempSync(path.join(dir, "nvm-"));
    fs.chmodSync(hidden, 0o700);
    const node = path.join(hidden, "node");
    fs.writeFileSync(node, "#!/bin/sh\necho not really node\n", { mode: 0o755 });
    const stateDir = path.join(dir, "state");
    fs.mkdirSync(stateDir, { mode: 0o711 });
    const runtime = createJailRuntime({ stateDir, supervisorEntry: "/nonexistent", hostUser: user });
    const copy = await runtime.nodeBinaryFor(node);
    expect(copy).toMatch(new RegExp(`^${stateDir}/bin/node-[0-9a-f]{12}$`));
    expect(fs.readFileSync(copy, "utf8")).toBe(fs.readFileSync(node, "utf8"));
    expect(unreachableBy(copy, user)).toBeNull();
    expect(await runtime.nodeBinaryFor(node)).toBe(copy);
    // Reachable binaries are bound as they are; a worker whose jails run as itself never copies.
    expect(await runtime.nodeBinaryFor("/usr/bin/env")).toBe("/usr/bin/env");
    expect(await createJailRuntime({ stateDir, supervisorEntry: "/nonexistent", hostUser: null }).nodeBinaryFor(node)).toBe(node);
  });
});
