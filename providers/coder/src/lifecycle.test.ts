// Workspace lifecycle against the Coder emulator: one workspace per acquisition, readiness and the
// marker claim, cleanup by UUID (idempotent, never starting anything, fail-closed), reuse through
// stop and start builds, env replacement, and CODER_HEADER on the control plane only.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TemplateSpec } from "@paperclip-sandbox/emulator-coder";
import { runnerEmulatorTemplate, runnerStartupScript } from "./runner-install.js";
import { startCoderEmulator, type CoderWorld } from "./__fixtures__/emulator.js";
import { labelValue } from "@paperclip-sandbox/kit";
import { coderConfigSchema } from "./config.js";
import { createCoderProvider } from "./plugin.js";
import { COMPANY, ENVIRONMENT, harness } from "./__fixtures__/harness.js";

let world: CoderWorld;
beforeAll(async () => {
  const runner = runnerEmulatorTemplate() as TemplateSpec;
  world = await startCoderEmulator({
    extraTemplates: [
      { ...runner, name: "never-ready", agent: { ...runner.agent, startupScript: "echo broken >&2; exit 3" } },
      // The pid file names a live process that is not the runner, as after a restart when its pid went to another.
      { ...runner, name: "pid-reused", agent: { ...runner.agent, startupScript: `mkdir -p ~/.paperclip-runner\nsleep 60 &\necho $! > ~/.paperclip-runner/pid\n${runnerStartupScript()}` } },
      // The runner runs, but the claim file cannot be written (a directory is in its way).
      { ...runner, name: "claim-blocked", agent: { ...runner.agent, startupScript: `mkdir -p ~/.paperclip-claim\n${runnerStartupScript()}` } },
      {
        ...runner,
        name: "with-params",
        parameters: [
          {
            name: "region",
            defaultValue: "eu",
            mutable: true,
            options: [
              { name: "EU", value: "eu" },
              { name: "US", value: "us" },
            ],
          },
        ],
      },
    ],
  });
}, 60_000);
afterAll(() => world?.emu.close(), 60_000);

const api = async <T = any>(path: string, init: RequestInit = {}): Promise<T> => {
  const response = await fetch(`${world.emu.url}/api/v2${path}`, { ...init, headers: { "coder-session-token": world.token, "content-type": "application/json", ...(init.headers ?? {}) } });
  return (await response.json()) as T;
};
const transitions = async (id: string) => (await api<any[]>(`/workspaces/${id}/builds`)).map((b) => `${b.transition}:${b.status}`).reverse();
const live = () => world.control.workspaces().filter((w) => !w.deleted);

async function waitBuild(id: string, status: string) {
  for (let i = 0; i < 400; i++) {
    const ws = await api(`/workspaces/${id}?include_deleted=true`);
    if (ws.latest_build.status === status) return ws;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`workspace ${id} never became ${status}`);
}

describe("acquisition", () => {
  it("makes a uniquely named workspace per acquisition, its UUID the lease id, with TTL and parameters", async () => {
    const h = harness({ ...world.config, template: "with-params", workspaceParameters: { region: "us" }, stopAfterHours: 2 });
    const a = await h.acquire({ runId: "run-same" });
    const b = await h.acquire({ runId: "run-same" });
    try {
      expect(a.providerLeaseId).toMatch(/^[0-9a-f-]{36}$/);
      expect(a.metadata).toMatchObject({ coderWorkspaceId: a.providerLeaseId, remoteCwd: "/home/coder/workspace", coderNamePrefix: "paperclip", coderOwner: "paperclip", coderAgent: "main" });
      // No metadata key of ours is named like a config field: the host merges metadata into the config it
      // sends (remoteCwd, the kit's, is a host key the host strips).
      for (const key of Object.keys(a.metadata!).filter((k) => k !== "remoteCwd")) expect(Object.keys(coderConfigSchema.shape)).not.toContain(key);
      const names = [a.metadata!.coderWorkspaceName, b.metadata!.coderWorkspaceName] as string[];
      for (const name of names) expect(name).toMatch(/^paperclip-[0-9a-f]{16}$/);
      expect(names[0]).not.toBe(names[1]);
      const ws = await api(`/workspaces/${a.providerLeaseId}`);
      expect(ws.ttl_ms).toBe(2 * 3_600_000);
      expect(Date.parse(a.expiresAt!)).toBe(Date.parse(ws.latest_build.deadline));
      expect(await api(`/workspacebuilds/${ws.latest_build.id}/parameters`)).toEqual([{ name: "region", value: "us" }]);
      // The marker claim: the workspace directory exists and the claim names this workspace.
      const claim = await h.sh(a, 'pwd; cat "$HOME/.paperclip-claim"');
      expect(claim.stdout).toBe(`/home/coder/workspace\n${JSON.stringify({ workspaceId: a.providerLeaseId, name: names[0] })}\n`);
    } finally {
      await h.destroy(a);
      await h.destroy(b);
    }
  });

  it("refuses parameters the template does not declare, before making anything", async () => {
    const h = harness({ ...world.config, template: "with-params", workspaceParameters: { zone: "x" } });
    const before = world.control.workspaces().length;
    await expect(h.acquire()).rejects.toThrow("Workspace parameters: zone is not a parameter of template with-params (its parameters: region)");
    expect(world.control.workspaces().length).toBe(before);
  });

  it("deletes a workspace whose agent never gets ready", async () => {
    const h = harness({ ...world.config, template: "never-ready" });
    const before = new Set(world.control.workspaces().map((w) => w.id));
    const failure = await h.acquire().catch((error: Error) => error);
    expect(String((failure as Error).message)).toMatch(/is not usable: the agent.s startup script ended in start_error/);
    const made = world.control.workspaces().filter((w) => !before.has(w.id));
    expect(made).toHaveLength(1);
    expect(made[0]!.deleted).toBe(true);
  });

  it("deletes a workspace whose marker claim fails", async () => {
    const h = harness({ ...world.config, template: "claim-blocked" });
    const before = new Set(world.control.workspaces().map((w) => w.id));
    await expect(h.acquire()).rejects.toThrow(/the marker claim failed/);
    const made = world.control.workspaces().filter((w) => !before.has(w.id));
    expect(made.map((w) => w.deleted)).toEqual([true]);
  });
});

describe("listing by labels (lost creates)", () => {
  it("finds a run's workspace by the hashes its name carries, and nothing by provider alone", async () => {
    const h = harness(world.config);
    const lease = await h.acquire({ runId: "run-listed" });
    try {
      const { listLeases } = createCoderProvider({ env: {} });
      const labels = { "paperclip-company": labelValue(COMPANY), "paperclip-environment": labelValue(ENVIRONMENT), "paperclip-run": labelValue("run-listed") };
      const found = await listLeases(world.config, { env: {}, matchLabels: labels });
      expect(found.map((entry) => entry.providerLeaseId)).toEqual([lease.providerLeaseId]);
      expect(found[0]!.metadata).toMatchObject({ coderWorkspaceId: lease.providerLeaseId, coderWorkspaceName: lease.metadata!.coderWorkspaceName });
      expect(await listLeases(world.config, { env: {}, matchLabels: { ...labels, "paperclip-run": labelValue("another-run") } })).toEqual([]);
      expect(await listLeases(world.config, { env: {} })).toEqual([]);
    } finally {
      await h.destroy(lease);
    }
  });
});

describe("cleanup", () => {
  it("deletes a stopped workspace by its UUID without starting it", async () => {
    const h = harness(world.config);
    const lease = await h.acquire();
    await api(`/workspaces/${lease.providerLeaseId}/builds`, { method: "POST", body: JSON.stringify({ transition: "stop" }) });
    await waitBuild(lease.providerLeaseId!, "stopped");
    expect(await h.release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(await transitions(lease.providerLeaseId!)).toEqual(["start:running", "stop:stopped", "delete:deleted"]);
  });

  it("a repeated cleanup succeeds once the latest build is deleted, whoever deleted it", async () => {
    const h = harness(world.config);
    const lease = await h.acquire();
    expect((await h.destroy(lease))?.state).toBe("destroyed");
    expect((await h.destroy(lease))?.state).toBe("destroyed");
    expect((await h.release(lease))?.state).toBe("destroyed");
    expect(await transitions(lease.providerLeaseId!)).toEqual(["start:running", "delete:deleted"]);

    const other = await h.acquire();
    await api(`/workspaces/${other.providerLeaseId}/builds`, { method: "POST", body: JSON.stringify({ transition: "delete" }) });
    expect((await h.destroy(other))?.state).toBe("destroyed");
    expect(await transitions(other.providerLeaseId!)).toEqual(["start:running", "delete:deleted"]);
  });

  it("waits out another client's build, then deletes", async () => {
    const h = harness(world.config);
    const lease = await h.acquire();
    await api(`/workspaces/${lease.providerLeaseId}/builds`, { method: "POST", body: JSON.stringify({ transition: "stop" }) });
    expect((await h.destroy(lease))?.state).toBe("destroyed");
    expect(await transitions(lease.providerLeaseId!)).toEqual(["start:running", "stop:stopped", "delete:deleted"]);
  });

  it("a release and a destroy at once make one delete build", async () => {
    const h = harness(world.config);
    const lease = await h.acquire();
    const [released, destroyed] = await Promise.all([h.release(lease), h.destroy(lease)]);
    expect([released?.state, destroyed?.state]).toEqual(["destroyed", "destroyed"]);
    expect(await transitions(lease.providerLeaseId!)).toEqual(["start:running", "delete:deleted"]);
  });

  it("fails closed on an old record without the workspace's UUID, and on metadata naming another workspace", async () => {
    const h = harness(world.config);
    const lease = await h.acquire();
    try {
      const oldRecord = { providerLeaseId: lease.metadata!.coderWorkspaceName as string, metadata: { remoteCwd: "/home/coder/workspace" } };
      await expect(h.destroy(oldRecord)).rejects.toThrow(/the record holds no workspace UUID \(an old record\)/);
      await expect(h.release(oldRecord)).rejects.toThrow(/the record holds no workspace UUID/);
      const crossed = { ...lease, metadata: { ...lease.metadata, coderWorkspaceId: "00000000-0000-4000-8000-000000000000" } };
      await expect(h.destroy(crossed)).rejects.toThrow(/its metadata names workspace 00000000-0000-4000-8000-000000000000/);
      expect((await api(`/workspaces/${lease.providerLeaseId}`)).latest_build.status).toBe("running");
    } finally {
      await h.destroy(lease);
    }
  });

  it("never deletes, keeps or resumes another company's workspace", async () => {
    const h = harness({ ...world.config, reuseLease: true });
    const lease = await h.acquire({ agentId: "agent-1", executionWorkspaceId: "ew-1" });
    try {
      await expect(h.destroy(lease, { companyId: "company-2" })).rejects.toThrow(/refusing to touch coder (sandbox|workspace) .*(paperclip-company|workspace name)/);
      await expect(h.release(lease, { companyId: "company-2" })).rejects.toThrow(/refusing to touch/);
      expect(await h.resume(lease, { companyId: "company-2" })).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
      expect((await api(`/workspaces/${lease.providerLeaseId}`)).latest_build.status).toBe("running");
    } finally {
      await h.destroy(lease);
    }
  });
});

describe("reuse", () => {
  it("keeps a reusable lease through a stop build and resumes it with a start build, disk and claim intact", async () => {
    const h = harness({ ...world.config, template: "with-params", workspaceParameters: { region: "us" }, reuseLease: true });
    const lease = await h.acquire({ agentId: "agent-1", executionWorkspaceId: "ew-1" });
    expect((await h.sh(lease, "echo kept > note.txt")).exitCode).toBe(0);
    expect(await h.release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect((await api(`/workspaces/${lease.providerLeaseId}`)).latest_build.status).toBe("stopped");
    const resumed = await h.resume(lease);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect((await h.sh(resumed, "cat note.txt")).stdout).toBe("kept\n");
    const ws = await api(`/workspaces/${lease.providerLeaseId}`);
    expect(await api(`/workspacebuilds/${ws.latest_build.id}/parameters`)).toEqual([{ name: "region", value: "us" }]);
    expect(await transitions(lease.providerLeaseId!)).toEqual(["start:running", "stop:stopped", "start:running"]);
    expect((await h.destroy(resumed))?.state).toBe("destroyed");
  });

  it("starts the runner when its pid file names another live process (pids start again with a restarted workspace)", async () => {
    const h = harness({ ...world.config, template: "pid-reused", reuseLease: true });
    const lease = await h.acquire({ agentId: "agent-1", executionWorkspaceId: "ew-1" });
    try {
      const runner = await h.sh(lease, 'tr "\\0" " " < /proc/$(cat ~/.paperclip-runner/pid)/cmdline');
      expect(runner.stdout).toContain(".paperclip-runner/paperclip-runner.js");
    } finally {
      await h.destroy(lease);
    }
  }, 30_000);

  it("a changed shape expires the kept lease and deletes its workspace", async () => {
    const h = harness({ ...world.config, reuseLease: true });
    const lease = await h.acquire({ agentId: "agent-1", executionWorkspaceId: "ew-1" });
    expect((await h.release(lease))?.state).toBe("stopped");
    const changed = { ...world.config, reuseLease: true, commandTransport: "rpty" };
    expect(await h.resume(lease, { config: changed })).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    await waitBuild(lease.providerLeaseId!, "deleted");
  });
});

describe("commands", () => {
  it("run with exactly the environment the plugin gives (nothing of the runner's or the agent process's own)", async () => {
    const h = harness(world.config);
    const lease = await h.acquire();
    try {
      const result = await h.execute(lease, "env", { args: [] });
      const names = result.stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => line.slice(0, line.indexOf("=")));
      expect(names).toEqual(expect.arrayContaining(["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG"]));
      // The runner's own environment (its port, the jail's TMPDIR and XDG dirs) never reaches a command.
      for (const leaked of ["PAPERCLIP_RUNNER_PORT", "TMPDIR", "XDG_CACHE_HOME", "PAPERCLIP_SCRIPT"]) expect(names).not.toContain(leaked);
      expect(result.stdout).toContain("HOME=/home/coder\n");
    } finally {
      await h.destroy(lease);
    }
  });

  it("CODER_HEADER goes on control-plane requests only, never to the app proxy", async () => {
    const h = harness(world.config, { env: { CODER_HEADER: "X-Paperclip-Probe=control-plane-only" } });
    const mark = world.emu.requests.mark();
    const lease = await h.acquire();
    await h.sh(lease, "true");
    await h.destroy(lease);
    await world.emu.requests.idle();
    const records = world.emu.requests.list({ since: mark });
    const api = records.filter((r) => r.path.startsWith("/api/v2/"));
    const app = records.filter((r) => r.path.includes("/apps/"));
    expect(api.length).toBeGreaterThan(3);
    expect(app.length).toBeGreaterThan(0);
    for (const record of api) expect(record.headers["x-paperclip-probe"]).toBe("control-plane-only");
    for (const record of app) expect(record.headers["x-paperclip-probe"]).toBeUndefined();
  });
});

describe("leftovers", () => {
  it("every workspace these tests made is deleted", async () => {
    expect(live().map((w) => `${w.name} ${w.status}`)).toEqual([]);
    expect(COMPANY).toBe("company-1");
  });
});
