// LeaseRuntime.start failing half-way must not leave what it already started behind.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { generatedEtcFiles } from "./jail/argv.js";
import { LeaseRuntime } from "./runtime.js";
import { createLeaseDirs, ensureStateDir, leasePaths, newLeaseId, type LeaseRecord } from "./store/lease-store.js";
import { createResolver } from "./egress/resolver.js";
import { bubblewrapLeftovers } from "./test-support/leftovers.js";

let stateDir: string | undefined;
afterEach(() => {
  if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
  stateDir = undefined;
});

describe("LeaseRuntime.start", () => {
  it("closes the egress proxy and removes the cgroups when the jail cannot be set up", async () => {
    stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-runtime-"));
    await ensureStateDir(stateDir);
    const leaseId = newLeaseId();
    const paths = leasePaths(stateDir, leaseId);
    await createLeaseDirs(paths, generatedEtcFiles());
    const record: LeaseRecord = {
      version: 1,
      leaseId,
      state: "running",
      createdAt: new Date().toISOString(),
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
      requestedExpiresAt: null,
      reuse: false,
      fingerprint: null,
      shapeFingerprint: "shape",
      grant: { allowFqdns: ["example.com"], allowCidrs: [] },
      owner: { pid: process.pid, startTime: null, uid: process.getuid?.() ?? 0 },
      jail: null,
      cgroups: [],
      labels: {},
    };
    const runtime = new LeaseRuntime({
      bwrapPath: "bwrap",
      supervisorScript: "/nonexistent/supervisor.js",
      nodeBinary: process.execPath,
      resolver: createResolver(new Map()),
    });

    // A rootfs that does not exist: building the jail's argv fails after the proxy and cgroups exist.
    await expect(runtime.start(paths, record, { rootfs: "/nonexistent/paperclip-rootfs", limits: { pids: 64 } })).rejects.toThrow();

    // A closed proxy server has unlinked its socket; an open one still listens on it.
    expect(fs.existsSync(paths.egressSocket)).toBe(false);
    fs.rmSync(paths.dir, { recursive: true, force: true });
    expect(await bubblewrapLeftovers(stateDir, [leaseId])).toEqual([]);
  });
});
