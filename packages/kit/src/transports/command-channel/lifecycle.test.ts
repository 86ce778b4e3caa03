// The command channel inside the lifecycle layer: the default probe reports which in-sandbox side
// runs, and release ends the channel before the sandbox goes.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { defineProviderConfig } from "../../config/define.js";
import { fields } from "../../config/fields.js";
import { createLocalScriptRunner } from "../../exec/local/local-runner.js";
import { isZombieOrGone } from "../../exec/local/proc-stat.js";
import { endMarkedProcesses } from "../../exec/local/process-marker.js";
import { defineSandboxProvider } from "../../provider/define.js";
import type { SandboxHandle } from "../../provider/types.js";
import { STREAM_TRANSPORT } from "../../transport.js";
import { commandChannelStatus, withCommandChannel, type ChannelImplementation } from "./index.js";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kit-channel-lifecycle-"));
const MARKER = "PAPERCLIP_CHANNEL_LIFECYCLE_TEST";
afterAll(async () => {
  await endMarkedProcesses(MARKER, root);
  fs.rmSync(root, { recursive: true, force: true });
});

const config = defineProviderConfig(z.object({ timeoutMs: fields.timeoutMs({ default: 30_000 }) }));

interface Box extends SandboxHandle {
  dir: string;
}

function provider(implementations?: readonly ChannelImplementation[]) {
  const events: string[] = [];
  let next = 0;
  const plugin = defineSandboxProvider<typeof config.schema, Box>({
    driverKey: "channel-memory",
    config,
    transport: STREAM_TRANSPORT,
    workspace: { existing: (box) => box.dir },
    shape: () => ({}),
    async create({ created, labels }) {
      const id = `box-${++next}-${process.pid}-${Date.now()}`;
      fs.mkdirSync(path.join(root, id, "tmp"), { recursive: true });
      fs.writeFileSync(path.join(root, id, "labels.json"), JSON.stringify(labels));
      created(id);
      return { providerLeaseId: id, dir: path.join(root, id), expiresAt: null, labels: { ...labels } };
    },
    async get(ref) {
      const dir = path.join(root, ref.providerLeaseId);
      if (!fs.existsSync(dir)) return null;
      return { providerLeaseId: ref.providerLeaseId, dir, expiresAt: null, labels: JSON.parse(fs.readFileSync(path.join(dir, "labels.json"), "utf8")) };
    },
    async destroy(ref) {
      const status = commandChannelStatus(ref.providerLeaseId);
      events.push(`destroy (channel ${status.state})`);
      fs.rmSync(path.join(root, ref.providerLeaseId), { recursive: true, force: true });
    },
    runner: (box) =>
      withCommandChannel(createLocalScriptRunner({ cwd: box.dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TMPDIR: path.join(box.dir, "tmp"), [MARKER]: root } }), {
        lease: box.providerLeaseId,
        ...(implementations ? { implementations } : {}),
      }),
  }).plugin;
  return { hooks: plugin.definition as Required<typeof plugin.definition>, events };
}

const scope = { driverKey: "channel-memory", companyId: "co", environmentId: "env" };

describe("command channel in the lifecycle layer", () => {
  it("the default probe reports the in-sandbox side the channel runs", async () => {
    const { hooks } = provider();
    const result = await hooks.onEnvironmentProbe({ ...scope, config: {} } as never);
    expect(result.ok).toBe(true);
    const channel = result.diagnostics?.find((d) => d.code === "PROBE_COMMAND_CHANNEL");
    expect(channel?.message).toMatch(/^command channel: node v\d+/);
    expect(result.summary).toBe("channel-memory sandbox ready");
  });

  it("the default probe warns, in its summary, when no in-sandbox side can run", async () => {
    const { hooks } = provider([]);
    const result = await hooks.onEnvironmentProbe({ ...scope, config: {} } as never);
    expect(result.ok).toBe(true);
    expect(result.diagnostics?.find((d) => d.code === "PROBE_COMMAND_CHANNEL_UNAVAILABLE")?.severity).toBe("warning");
    expect(result.summary).toMatch(/^channel-memory sandbox ready — no command channel \(.*none runs here.*\): every command is a vendor exec of its own$/);
  });

  it("release ends the lease's channel before the sandbox is destroyed", async () => {
    const { hooks, events } = provider();
    const lease = await hooks.onEnvironmentAcquireLease({ ...scope, config: {}, runId: "r1" } as never);
    const exec = () => hooks.onEnvironmentExecute({ ...scope, config: {}, lease, command: "echo", args: ["hi"] } as never);
    expect((await exec()).stdout).toBe("hi\n");
    await vi.waitFor(() => expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready"), { timeout: 20_000, interval: 20 });
    const muxPid = commandChannelStatus(lease.providerLeaseId!).pid!;
    expect((await exec()).stdout).toBe("hi\n");
    expect(commandChannelStatus(lease.providerLeaseId!).overChannel).toBe(1);
    await hooks.onEnvironmentReleaseLease({ ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata } as never);
    expect(events).toEqual(["destroy (channel none)"]);
    expect(isZombieOrGone(muxPid)).toBe(true);
  });
});
