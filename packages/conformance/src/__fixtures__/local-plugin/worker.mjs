// The smallest provider that should pass the conformance suite: a temp dir per lease on this
// machine, one process group per command, tar for directory sync. It exists so the suite can
// be tested before any real provider builds. LOCAL_FIXTURE_BREAK=<feature>[,<feature>] disables a
// behaviour: group-kill, mode, wait-for-stdout (a background child on stdout delays the result),
// late-expiry (an expiry after the requested deadline), release-leaves-processes (a release receipt
// while processes that left the command's group, e.g. by setsid, still run).
import { spawn, execFile } from "node:child_process";
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { definePlugin, runWorker } from "@paperclipai/plugin-sdk";

const run = promisify(execFile);
const baseDir = process.env.LOCAL_FIXTURE_BASE_DIR || path.join(os.tmpdir(), "paperclip-conformance-local-fixture");
const broken = new Set((process.env.LOCAL_FIXTURE_BREAK ?? "").split(",").filter(Boolean));
const groups = new Map(); // leaseId -> Set<pgid>
const active = new Map(); // leaseId -> Set<Promise>
let ctx;

function validate(config) {
  const errors = [];
  for (const key of Object.keys(config)) if (!["timeoutMs", "reuseLease"].includes(key)) errors.push(`${key}: unknown field`);
  if (config.timeoutMs !== undefined && !(Number.isInteger(config.timeoutMs) && config.timeoutMs > 0)) {
    errors.push("timeoutMs: must be a positive integer");
  }
  if (config.reuseLease !== undefined && typeof config.reuseLease !== "boolean") errors.push("reuseLease: must be a boolean");
  return errors;
}

const leaseDir = (id) => path.join(baseDir, id);
const exists = (p) =>
  stat(p).then(
    () => true,
    () => false,
  );
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Every command of a lease carries this in its environment, whatever group or session it moves to. */
const LEASE_VARIABLE = "LOCAL_FIXTURE_LEASE";

async function markedProcesses(id) {
  const pids = [];
  for (const name of await readdir("/proc").catch(() => [])) {
    if (!/^\d+$/.test(name)) continue;
    const environ = await readFile(`/proc/${name}/environ`, "utf8").catch(() => "");
    if (environ.split("\0").includes(`${LEASE_VARIABLE}=${id}`)) pids.push(Number(name));
  }
  return pids;
}

async function endLeaseWork(id) {
  for (const pgid of groups.get(id) ?? []) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {}
  }
  await Promise.allSettled([...(active.get(id) ?? [])]);
  for (let i = 0; i < 50 && [...(groups.get(id) ?? [])].some(groupAlive); i++) await sleep(20);
  groups.delete(id);
  if (broken.has("release-leaves-processes")) return;
  // What left the groups (setsid): found by the lease's variable, ended, and waited for.
  for (let i = 0; i < 250; i++) {
    const left = await markedProcesses(id);
    if (left.length === 0) break;
    for (const pid of left) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    await sleep(20);
  }
}

function leaseOf(id) {
  return { providerLeaseId: id, metadata: { remoteCwd: leaseDir(id) } };
}

async function execute(params) {
  const id = params.lease.providerLeaseId;
  const child = spawn(params.command, params.args ?? [], {
    cwd: params.cwd ?? leaseDir(id),
    env: { ...process.env, ...(params.env ?? {}), [LEASE_VARIABLE]: id },
    detached: true, // its own process group, so a timeout can end everything it started
    stdio: ["pipe", "pipe", "pipe"],
  });
  if (!broken.has("group-kill")) {
    if (!groups.has(id)) groups.set(id, new Set());
    groups.get(id).add(child.pid);
  }
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c) => {
    stdout += c;
    ctx.execution.log("stdout", c);
  });
  child.stderr.setEncoding("utf8").on("data", (c) => {
    stderr += c;
    ctx.execution.log("stderr", c);
  });
  child.stdin.on("error", () => {});
  child.stdin.end(params.stdin ?? "");
  let timedOut = false;
  const timeoutMs = params.timeoutMs ?? params.config?.timeoutMs;
  const timer = timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        try {
          process.kill(broken.has("group-kill") ? child.pid : -child.pid, "SIGKILL");
        } catch {}
      }, timeoutMs)
    : undefined;
  const done = new Promise((resolve) => {
    child.on("error", (error) => resolve({ exitCode: 127, signal: null, error }));
    child.on("exit", (code, signal) => {
      // Output may still sit in the pipes; a background child holding them must not block us.
      const finish = () => resolve({ exitCode: code, signal });
      child.stdout.once("close", finish);
      if (!broken.has("wait-for-stdout")) setTimeout(finish, 100);
    });
  });
  if (!active.has(id)) active.set(id, new Set());
  active.get(id).add(done);
  const exit = await done;
  active.get(id)?.delete(done);
  clearTimeout(timer);
  return { exitCode: timedOut ? null : exit.exitCode, signal: exit.signal, timedOut, stdout, stderr: exit.error ? String(exit.error) : stderr };
}

async function copyTree(source, target, exclude = []) {
  await rm(target, { recursive: true, force: true });
  await mkdir(target, { recursive: true });
  const excludes = exclude.map((e) => `--exclude=${e}`);
  await run("sh", ["-c", 'src=$1; dst=$2; shift 2; tar -C "$src" -cf - "$@" . | tar -C "$dst" -xpf -', "sh", source, target, ...excludes]);
}

async function copyFileAtomic(source, target, mode) {
  await mkdir(path.dirname(target), { recursive: true });
  const staging = await mkdtemp(path.join(path.dirname(target), ".paperclip-upload-"));
  const staged = path.join(staging, "file");
  await copyFile(source, staged);
  if (mode !== undefined) await chmod(staged, mode);
  await rename(staged, target);
  await rm(staging, { recursive: true, force: true });
}

async function sync(params) {
  const operations = [];
  for (const op of params.operations) {
    let files = 0;
    let bytes = 0;
    for (const f of op.files) {
      if (f.kind === "directory") await copyTree(f.sourcePath, f.targetPath, f.exclude ?? []);
      else await copyFileAtomic(f.sourcePath, f.targetPath, broken.has("mode") ? undefined : f.mode);
      files += 1;
      bytes += (await stat(f.targetPath)).size;
    }
    operations.push({ operationId: op.operationId, filesTransferred: files, bytesTransferred: bytes });
  }
  return { operations };
}

const plugin = definePlugin({
  async setup(context) {
    ctx = context;
  },
  async onEnvironmentValidateConfig({ config }) {
    const errors = validate(config);
    return errors.length ? { ok: false, errors } : { ok: true, normalizedConfig: { timeoutMs: 300000, reuseLease: false, ...config } };
  },
  async onEnvironmentProbe() {
    return { ok: true, summary: "local fixture" };
  },
  async onEnvironmentAcquireLease(params) {
    await mkdir(baseDir, { recursive: true });
    const dir = await mkdtemp(path.join(baseDir, "lease-"));
    // No lifetime of its own: the host's deadline is the lease's (a local dir needs no enforcement here).
    const requested = params.requestedExpiresAt ? Date.parse(params.requestedExpiresAt) : null;
    const expiresAt = requested === null ? null : new Date(broken.has("late-expiry") ? requested + 3_600_000 : requested).toISOString();
    return { ...leaseOf(path.basename(dir)), expiresAt };
  },
  async onEnvironmentResumeLease({ providerLeaseId }) {
    if (await exists(leaseDir(providerLeaseId))) return leaseOf(providerLeaseId);
    return { providerLeaseId: null, metadata: { expired: true } };
  },
  async onEnvironmentReleaseLease({ providerLeaseId, config }) {
    if (!providerLeaseId) return undefined;
    await endLeaseWork(providerLeaseId);
    if (config.reuseLease) return { providerLeaseId, state: "stopped" };
    await rm(leaseDir(providerLeaseId), { recursive: true, force: true });
    return { providerLeaseId, state: "destroyed" };
  },
  async onEnvironmentDestroyLease({ providerLeaseId }) {
    if (!providerLeaseId) return undefined;
    await endLeaseWork(providerLeaseId);
    await rm(leaseDir(providerLeaseId), { recursive: true, force: true });
    return { providerLeaseId, state: "destroyed" };
  },
  async onEnvironmentRealizeWorkspace({ lease }) {
    return { cwd: lease.metadata.remoteCwd };
  },
  onEnvironmentExecute: execute,
  onEnvironmentSyncIn: sync,
  onEnvironmentSyncOut: sync,
});

export default plugin;
runWorker(plugin, import.meta.url);
