import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeSandboxHome, REPO_ROOT, runCli } from "./__fixtures__/cli-harness.js";
import { currentOwner, hostId } from "./host-identity.js";
import { LeaseDb } from "./lease-db.js";

const FIXTURE = path.join(REPO_ROOT, "packages", "cli", "src", "__fixtures__", "hosted-plugin");
const KEY = "hf_live_4c3b2a190817263544536271";
const WRONG_KEY = "hf_live_0000wrong1111key2222";

interface Sandbox {
  id: string;
  labels: Record<string, string>;
  createdAt: string;
  expiresAt?: string;
}

/**
 * `leases gc` against a hosted-style provider (the fixture plugin) whose vendor is a loopback API:
 * leaks are found by listing at the vendor, by label, and destroyed through the worker's
 * destroyLease hook (which checks ownership before it deletes).
 */
describe("leases gc with a provider that lists its leases at the vendor", () => {
  const home = makeSandboxHome("vendor-gc");
  const sandboxes = new Map<string, Sandbox>();
  const calls: string[] = [];
  let server: Server;
  let apiUrl = "";
  const ours = () => ({ "paperclip-provider": "hosted-fixture", "paperclip-company": "paperclip-sandbox-cli", "paperclip-environment": `cli-${hostId()}` });
  const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();

  beforeAll(async () => {
    server = createServer((req, res) => {
      calls.push(`${req.method} ${req.url}`);
      const send = (status: number, body: unknown) => {
        const text = body === undefined ? "" : JSON.stringify(body);
        res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text);
      };
      // A careless vendor: it echoes the credential it rejects.
      if (req.headers.authorization !== `Bearer ${KEY}`) return send(401, { message: `invalid API key: ${req.headers.authorization}` });
      const url = new URL(req.url!, "http://x");
      const id = decodeURIComponent(url.pathname.split("/")[2] ?? "");
      if (req.method === "GET" && url.pathname === "/sandboxes") return send(200, { sandboxes: [...sandboxes.values()] }); // no server-side label filter
      if (!sandboxes.has(id)) return send(404, { message: `sandbox ${id} not found` });
      if (req.method === "GET") return send(200, sandboxes.get(id));
      if (req.method === "DELETE") {
        sandboxes.delete(id);
        return send(204, undefined);
      }
      send(405, { message: "no" });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const add = (id: string, labels: Record<string, string>, createdAt: string, expiresAt?: string) => sandboxes.set(id, { id, labels, createdAt, expiresAt });
    add("orphan", ours(), hoursAgo(2));
    add("young", ours(), hoursAgo(0));
    add("expired", ours(), hoursAgo(0), hoursAgo(0.5));
    add("hosts", { "paperclip-provider": "hosted-fixture", "paperclip-company": "3f1c2b9e-6a5d-4c3b-8a7f-1e2d3c4b5a69", "paperclip-environment": "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d" }, hoursAgo(3));
    add("daytonas", { ...ours(), "paperclip-provider": "daytona" }, hoursAgo(5));
    add("in-use", ours(), hoursAgo(4));

    // A lease this very process holds, as a running `paperclip-sandbox run` would.
    const db = LeaseDb.open(home.db);
    const row = db.insertAcquiring({
      id: "row-in-use",
      provider: "hosted-fixture",
      pluginDir: FIXTURE,
      companyId: "paperclip-sandbox-cli",
      environmentId: `cli-${hostId()}`,
      runId: "run-1",
      labels: {},
      reusable: false,
      config: { apiUrl, apiKey: { $secret: { env: "HF_KEY" } } },
      configFingerprint: "f",
      owner: currentOwner(),
      purpose: "run",
    });
    db.markActive(row.id, { providerLeaseId: "hf-in-use", metadata: null, expiresAt: null }, currentOwner());
    db.close();
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    home.dispose();
  });

  const gc = (...extra: string[]) =>
    runCli(["leases", "gc", "--db", home.db, "--provider", FIXTURE, "--set", `apiUrl=${apiUrl}`, "--secret", "apiKey=HF_KEY", ...extra], {
      env: { ...home.env, HF_KEY: KEY, HF_WRONG: WRONG_KEY },
    });
  const deletes = () => calls.filter((c) => c.startsWith("DELETE"));

  it("a rejected credential is reported without the credential, even when the vendor echoes it", async () => {
    const r = await runCli(["leases", "gc", "--db", home.db, "--provider", FIXTURE, "--set", `apiUrl=${apiUrl}`, "--secret", "apiKey=HF_WRONG", "--dry-run"], {
      env: { ...home.env, HF_KEY: KEY, HF_WRONG: WRONG_KEY },
    });
    expect(r.stderr).toMatch(/cannot list hosted-fixture leases: hosted-fixture listSandboxes failed: HTTP 401 http_401: invalid API key: \[REDACTED\]/);
    expect(r.stdout + r.stderr).not.toContain(WRONG_KEY);
    expect(r.stdout + r.stderr).not.toContain(KEY);
    expect(deletes()).toEqual([]);
  });

  it("--dry-run shows the plan and deletes nothing", async () => {
    const r = await gc("--dry-run");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/would destroy\s+hosted-fixture\s+hf-orphan\s+listing\s+not in the lease database\n/);
    expect(r.stdout).toMatch(/would destroy\s+hosted-fixture\s+hf-expired\s+listing\s+not in the lease database; expired at the provider\n/);
    expect(r.stdout).toMatch(/would destroy\s+hosted-fixture\s+hf-hosts\s+listing/);
    expect(r.stdout).not.toMatch(/hf-young|hf-daytonas|hf-in-use/);
    expect(deletes()).toEqual([]);
    expect(calls).toContain("GET /sandboxes?labels=paperclip-provider%3Dhosted-fixture");
  });

  it("destroys this machine's orphans through the worker's destroyLease hook, and leaves the rest", async () => {
    const r = await gc();
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/destroyed\s+hosted-fixture\s+hf-orphan\s+listing\s+not in the lease database\n/);
    expect(r.stdout).toMatch(/destroyed\s+hosted-fixture\s+hf-expired\s+listing/);
    expect(r.stdout).toMatch(/would destroy\s+hosted-fixture\s+hf-hosts\s+listing\s+not in the lease database; not created by this machine's CLI \(use --yes\)/);
    expect(deletes().sort()).toEqual(["DELETE /sandboxes/expired", "DELETE /sandboxes/orphan"]);
    // The worker looked at each sandbox's labels before deleting it.
    expect(calls).toContain("GET /sandboxes/orphan");
    expect([...sandboxes.keys()].sort()).toEqual(["daytonas", "hosts", "in-use", "young"]);
    expect(r.stdout + r.stderr).not.toContain(KEY);
  });

  it("--yes also destroys the host's leak, passing its own company and environment to the hook", async () => {
    const r = await gc("--yes");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/destroyed\s+hosted-fixture\s+hf-hosts\s+listing\s+not in the lease database \(--yes\)/);
    expect([...sandboxes.keys()].sort()).toEqual(["daytonas", "in-use", "young"]);
  });

  it("--config and --set without --provider is bad input", async () => {
    const r = await runCli(["leases", "gc", "--db", home.db, "--set", "apiUrl=http://x"], { env: home.env });
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(/--config and --set need --provider/);
  });
});

describe("leases gc with no --provider and no configured hosted provider", () => {
  const home = makeSandboxHome("gc-unconfigured");
  afterAll(() => home.dispose());

  it("contacts nothing (no connect, no DNS lookup of a vendor host) and says which providers it skipped", async () => {
    const noNetwork = path.join(REPO_ROOT, "packages", "cli", "src", "__fixtures__", "no-network.mjs");
    const r = await runCli(["leases", "gc", "--db", home.db, "--json"], { env: { ...home.env, NODE_OPTIONS: `--import=${noNetwork}` } });
    expect(r.stderr).not.toContain("NETWORK CONTACT");
    expect(r.stderr).not.toMatch(/cannot list/);
    // Each new hosted provider appends its name to the list.
    expect(r.stderr).toMatch(/leases gc: skipped daytona, e2b, kubernetes, modal, novita(, [a-z0-9-]+)*: not configured here/);
    expect(r.code).toBe(0);
    const skipped = (JSON.parse(r.stdout) as { skipped: string[] }).skipped;
    expect(skipped.slice(0, 5)).toEqual(["daytona", "e2b", "kubernetes", "modal", "novita"]);
    expect(skipped).toContain("exe-dev");
    expect(skipped).toContain("boxd");
  });
});
