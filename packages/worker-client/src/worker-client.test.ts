import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  METHOD_NOT_FOUND,
  METHOD_NOT_IMPLEMENTED,
  CAPABILITY_DENIED,
  TIMEOUT,
  WORKER_ERROR,
  WORKER_UNAVAILABLE,
  WorkerRpcError,
  loadPluginPackage,
  startWorker,
  type PluginPackage,
  type WorkerClient,
} from "./index.js";

const fixtureDir = fileURLToPath(new URL("./__fixtures__/echo-plugin", import.meta.url));
const base = { driverKey: "echo", companyId: "company-1", environmentId: "env-1", config: {} };
const lease = { providerLeaseId: "lease-1", metadata: {} };

function execute(client: WorkerClient, command: string, extra: Record<string, unknown> = {}, opts = {}) {
  return client.env.execute({ ...base, lease, command, ...extra }, opts);
}

async function rejection(promise: Promise<unknown>): Promise<WorkerRpcError> {
  const error = await promise.then(
    () => {
      throw new Error("expected the call to reject");
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkerRpcError);
  return error as WorkerRpcError;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("loadPluginPackage", () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), "worker-client-pkg-"));
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it("resolves manifest and worker from package.json paperclipPlugin", async () => {
    const pkg = await loadPluginPackage(fixtureDir);
    expect(pkg).toMatchObject({ name: "echo-plugin-fixture", version: "1.2.3", dir: fixtureDir });
    expect(pkg.workerPath).toBe(path.join(fixtureDir, "worker.mjs"));
    expect(pkg.manifest.id).toBe("test.echo-plugin");
  });

  it("names the missing paperclipPlugin key", async () => {
    const dir = path.join(scratch, "no-worker-key");
    await mkdir(dir);
    await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "x", paperclipPlugin: { manifest: "./m.js" } }));
    await expect(loadPluginPackage(dir)).rejects.toThrow(/paperclipPlugin\.worker/);
  });

  it("tells the user to build when the built file is missing", async () => {
    const dir = path.join(scratch, "unbuilt");
    await mkdir(dir);
    await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "x", paperclipPlugin: { manifest: "./dist/manifest.js", worker: "./dist/worker.js" } }));
    await expect(loadPluginPackage(dir)).rejects.toThrow(/run npm run build/);
  });
});

describe("startWorker against the echo fixture", () => {
  let pkg: PluginPackage;
  let client: WorkerClient;
  const workerLogs: Array<{ level: string; message: string }> = [];

  beforeAll(async () => {
    pkg = await loadPluginPackage(fixtureDir);
    client = await startWorker(pkg, {
      env: { ECHO_EXTRA: "passed-through" },
      onLog: (entry) => workerLogs.push(entry),
    });
  });
  afterAll(async () => {
    await client?.shutdown();
  });

  it("initializes and reports the hooks the plugin defines", () => {
    expect(client.pid).toBeGreaterThan(0);
    expect(client.supportedMethods).toEqual(expect.arrayContaining(["environmentValidateConfig", "environmentProbe", "environmentExecute", "shutdown"]));
    expect(client.supportedMethods).not.toContain("environmentSyncIn");
  });

  it("gives the worker only the host's scrubbed environment plus opts.env", async () => {
    const probe = await client.env.probe(base);
    expect(probe.metadata?.pluginId).toBe("test.echo-plugin");
    const keys = probe.metadata?.envKeys as string[];
    const allowed = new Set(["PATH", "NODE_PATH", "PAPERCLIP_PLUGIN_ID", "NODE_ENV", "TZ", "ECHO_EXTRA"]);
    // Node itself may add NODE_CHANNEL_* for the IPC channel the host also opens.
    expect(keys.filter((key) => !allowed.has(key) && !key.startsWith("NODE_CHANNEL_"))).toEqual([]);
    expect((await execute(client, "env", { args: ["ECHO_EXTRA"] })).stdout).toBe("passed-through");
  });

  it("routes execute.log chunks to the call that produced them, before it returns", async () => {
    const seen: Record<string, string[]> = { a: [], b: [] };
    const call = (name: "a" | "b", args: string[]) => execute(client, "stream", { args }, { onLog: (stream: string, chunk: string) => seen[name]!.push(`${stream}:${chunk}`) });
    const [a, b] = await Promise.all([call("a", ["a1", "a2", "a3"]), call("b", ["b1", "b2"])]);
    expect(a.stdout).toBe("a1\na2\na3");
    expect(b.stdout).toBe("b1\nb2");
    expect(seen.a).toEqual(["stdout:a1\n", "stdout:a2\n", "stdout:a3\n", "stderr:done\n"]);
    expect(seen.b).toEqual(["stdout:b1\n", "stdout:b2\n", "stderr:done\n"]);
  });

  it("uses a caller-supplied invocation id for routing", async () => {
    const chunks: string[] = [];
    await execute(client, "stream", { args: ["x"] }, { invocationId: "my-invocation", onLog: (_s: string, c: string) => chunks.push(c) });
    expect(chunks).toEqual(["x\n", "done\n"]);
  });

  it("carries several MiB each way without corruption", async () => {
    const input = "é".repeat(3 * 1024 * 1024); // multi-byte chars split across pipe chunks
    expect((await execute(client, "echo-stdin", { stdin: input })).stdout).toBe(input);
    const size = 8 * 1024 * 1024;
    expect((await execute(client, "big", { args: [String(size)] })).stdout.length).toBe(size);
  });

  it("surfaces worker errors with their codes", async () => {
    const thrown = await rejection(execute(client, "fail"));
    expect(thrown.code).toBe(WORKER_ERROR);
    expect(thrown.method).toBe("environmentExecute");
    expect(thrown.message).toMatch(/boom from the worker/);
    expect((await rejection(execute(client, "fail-coded"))).code).toBe(CAPABILITY_DENIED);
    expect((await rejection(client.call("environmentSyncIn", { ...base, lease, operations: [] }))).code).toBe(METHOD_NOT_IMPLEMENTED);
    expect((await rejection(client.call("noSuchMethod", {}))).code).toBe(METHOD_NOT_FOUND);
  });

  it("answers worker->host requests: log is forwarded, the rest get METHOD_NOT_FOUND at once", async () => {
    const started = Date.now();
    const result = await execute(client, "host-calls");
    expect(result.stdout).toBe(String(METHOD_NOT_FOUND));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(workerLogs).toContainEqual({ level: "info", message: "hello from the worker" });
  });

  it("rejects a call that outlives its timeout with TIMEOUT, and keeps working", async () => {
    const started = Date.now();
    const thrown = await rejection(execute(client, "sleep", { args: ["2000"] }, { timeoutMs: 200 }));
    expect(thrown.code).toBe(TIMEOUT);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect((await execute(client, "echo-stdin", { stdin: "still here" })).stdout).toBe("still here");
  });
});

describe("worker lifecycle", () => {
  let pkg: PluginPackage;
  beforeAll(async () => {
    pkg = await loadPluginPackage(fixtureDir);
  });

  it("fails every pending call with WORKER_UNAVAILABLE when the worker dies, and later calls too", async () => {
    const client = await startWorker(pkg);
    const pending = execute(client, "sleep", { args: ["5000"] });
    const crash = execute(client, "crash");
    expect((await rejection(pending)).code).toBe(WORKER_UNAVAILABLE);
    expect((await rejection(crash)).code).toBe(WORKER_UNAVAILABLE);
    expect(await client.exited).toEqual({ code: 7, signal: null });
    expect((await rejection(execute(client, "echo-stdin"))).code).toBe(WORKER_UNAVAILABLE);
  });

  it("shuts down through the shutdown RPC with a clean exit", async () => {
    const client = await startWorker(pkg);
    await client.shutdown();
    expect(await client.exited).toEqual({ code: 0, signal: null });
    expect(isAlive(client.pid)).toBe(false);
  });

  it("escalates to SIGTERM when the worker does not exit within graceMs", async () => {
    const client = await startWorker(pkg, { env: { ECHO_PLUGIN_HANG_ON_SHUTDOWN: "1" } });
    const started = Date.now();
    await client.shutdown({ graceMs: 300 });
    expect(await client.exited).toEqual({ code: null, signal: "SIGTERM" });
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it("kill() ends the worker with the given signal", async () => {
    const client = await startWorker(pkg);
    client.kill("SIGKILL");
    expect(await client.exited).toEqual({ code: null, signal: "SIGKILL" });
  });

  it("reports a worker that dies before initialize, with its stderr and without opts.env values", async () => {
    const scratch = await mkdtemp(path.join(os.tmpdir(), "worker-client-broken-"));
    try {
      await writeFile(path.join(scratch, "worker.mjs"), `console.error("cannot start, token=" + process.env.SECRET_TOKEN); process.exit(2);\n`);
      const broken: PluginPackage = { ...pkg, dir: scratch, workerPath: path.join(scratch, "worker.mjs") };
      const thrown = await rejection(startWorker(broken, { env: { SECRET_TOKEN: "s3cr3t-value" } }));
      expect(thrown.code).toBe(WORKER_UNAVAILABLE);
      expect(thrown.message).toMatch(/cannot start/);
      expect(thrown.message).not.toMatch(/s3cr3t-value/);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  });

  it("keeps opts.env values out of the message when the worker refuses initialize", async () => {
    const scratch = await mkdtemp(path.join(os.tmpdir(), "worker-client-refusing-"));
    try {
      // Answers initialize with an error that echoes a credential, as a careless setup() might.
      await writeFile(
        path.join(scratch, "worker.mjs"),
        `process.stdin.once("data", (line) => {
          const { id } = JSON.parse(String(line).split("\\n")[0]);
          const message = "setup failed: token " + process.env.SECRET_TOKEN + " was rejected";
          process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message } }) + "\\n");
        });\n`,
      );
      const refusing: PluginPackage = { ...pkg, dir: scratch, workerPath: path.join(scratch, "worker.mjs") };
      const thrown = await rejection(startWorker(refusing, { env: { SECRET_TOKEN: "s3cr3t-value" } }));
      expect(thrown.message).toMatch(/setup failed: token \[REDACTED\] was rejected/);
      expect(thrown.message).not.toMatch(/s3cr3t-value/);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  });
});
