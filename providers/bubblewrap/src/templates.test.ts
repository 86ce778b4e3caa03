// Custom images on bubblewrap beyond the shared conformance cases: where a template lives, who may
// read it, and that it never crosses state directories. Drives the built worker
// (`npx tsc -b providers/bubblewrap` first).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import { providerConfig } from "./config.js";
import { IDLE_STOP_ENV } from "./plugin.js";
import { eventually, startHarness, type Harness } from "./test-support/harness.js";

let h: Harness;
const otherStateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-tpl-other-"));
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
  fs.rmSync(otherStateDir, { recursive: true, force: true });
});

const CALL = { timeoutMs: 180_000 };

/** A setup sandbox with `secret.txt` in its workspace, captured, the setup cancelled as the host does. */
async function capture(h: Harness, beforeCapture: (providerLeaseId: string) => Promise<void> = async () => undefined): Promise<string> {
  const session = await h.client.call<{ providerLeaseId: string; metadata: Record<string, unknown> }>(
    "environmentStartInteractiveSetup",
    { ...h.base(), sessionId: randomUUID(), expiresAt: new Date(Date.now() + 600_000).toISOString() },
    CALL,
  );
  try {
    const lease = { providerLeaseId: session.providerLeaseId, metadata: session.metadata };
    expect((await h.sh(lease, "echo captured > secret.txt")).exitCode).toBe(0);
    await beforeCapture(session.providerLeaseId);
    const captured = await h.client.call<{ templateRef: string }>("environmentCaptureTemplate", { ...h.base(), providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata }, CALL);
    return captured.templateRef;
  } finally {
    await h.client.call("environmentCancelInteractiveSetup", { ...h.base(), providerLeaseId: session.providerLeaseId, reason: "promoted" }, CALL);
  }
}

describe("bubblewrap custom images", () => {
  it("refuses a template ref that is not one (a path, another shape) in the config, naming the field", () => {
    for (const value of ["../../etc", "tpl-../x", "tpl-ABCDEF0123456789abcdef01", "/var/tmp/tpl-0123456789abcdef01234567"]) {
      const result = providerConfig.validate({ templateRef: value });
      expect(result.ok, value).toBe(false);
      expect(result.errors?.join("\n")).toMatch(/^Custom image template: must be a template Paperclip captured/);
    }
    expect(providerConfig.validate({ templateRef: "tpl-0123456789abcdef01234567" }).ok).toBe(true);
  });

  it("keeps a template in the state directory, readable by the worker's user only, out of every jail's sight", async () => {
    const ref = await capture(h);
    const dir = path.join(h.stateDir, "templates", ref);
    expect(fs.statSync(path.join(h.stateDir, "templates")).mode & 0o777).toBe(0o700);
    expect(fs.readFileSync(path.join(dir, "disk", "workspace", "secret.txt"), "utf8")).toBe("captured\n");
    const lease = await h.acquire();
    const seen = await h.sh(lease, `ls ${JSON.stringify(dir)} 2>&1; ls /workspace`);
    expect(seen.stdout).toMatch(/No such file or directory/);
    expect(seen.stdout).not.toMatch(/secret\.txt/);
    await h.release(lease);
    await h.client.call("environmentDeleteTemplate", { ...h.base(), templateRef: ref }, CALL);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("never starts from a template of another state directory: refused naming the field, no lease made", async () => {
    const ref = await capture(h);
    const leasesBefore = fs.readdirSync(path.join(otherStateDir)).length;
    await expect(h.acquire({}, { ...h.config, stateDir: otherStateDir, templateRef: ref })).rejects.toThrow(/templateRef: bubblewrap has no template "tpl-[0-9a-f]{24}" in this config's store/);
    expect(fs.readdirSync(otherStateDir).length).toBe(leasesBefore);
    // In its own state directory it starts fine, with the captured file.
    const lease = await h.acquire({}, { ...h.config, templateRef: ref });
    expect((await h.sh(lease, "cat secret.txt", { config: { ...h.config, templateRef: ref } })).stdout).toBe("captured\n");
    await h.release(lease);
    await h.client.call("environmentDeleteTemplate", { ...h.base(), templateRef: ref }, CALL);
  });

  it("captures a setup sandbox whose jail went dormant while the operator was away, with its files", async () => {
    const idle = await startHarness({ env: { [IDLE_STOP_ENV]: "2000" } });
    const observer = createSandboxBackend({ stateDir: idle.stateDir });
    try {
      const ref = await capture(idle, async (id) => {
        expect(
          await eventually(
            async () => (await observer.summary(id))?.alive,
            (alive) => alive === false,
            60_000,
          ),
        ).toBe(false);
      });
      const lease = await idle.acquire({}, { ...idle.config, templateRef: ref });
      expect((await idle.sh(lease, "cat secret.txt")).stdout).toBe("captured\n");
      await idle.release(lease);
    } finally {
      await observer.close();
      await idle.close();
    }
    // Two jail starts, an idle period and a capture: generous on a loaded machine.
  }, 240_000);
});
