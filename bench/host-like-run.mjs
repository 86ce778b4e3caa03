// One trivial agent run as the real host drives a sandbox provider (scripts/e2e-paperclip/HOST-CALLS.md
// §1), through a worker client: acquire, realize, 13 preflight executes (8 uploads by stdin), 4
// concurrent tar syncIns with post-upload extracts, the config copy, the bridge upload (stdin), its
// start (`nohup … &`) and readiness, the agent's execute (stdin = the prompt) while the host polls
// the file bridge 30 times, the bridge stop, a syncOut of the workspace, the clean-up execute and the
// release: about 52 executes, as on the host.
import fs from "node:fs";
import path from "node:path";

/** Four small trees to sync in, like the host's run-start tars (written once under `dir`). */
export function makeRunStartTrees(dir) {
  const trees = [];
  for (let t = 0; t < 4; t += 1) {
    const src = path.join(dir, `run-start-${t}`);
    for (let i = 0; i < 20; i += 1) {
      const sub = path.join(src, `d${i % 4}`);
      fs.mkdirSync(sub, { recursive: true });
      fs.writeFileSync(path.join(sub, `f${i}.txt`), Buffer.alloc(3 * 1024, 97 + (i % 26)));
    }
    trees.push(src);
  }
  return trees;
}

/**
 * @param {object} o
 * @param {import("../packages/worker-client/dist/index.js").WorkerClient} o.client
 * @param {object} o.base  driverKey, companyId, environmentId, config
 * @param {string[]} o.trees  from makeRunStartTrees
 * @param {string} o.scratch  host directory for the syncOut target
 * @param {string} o.tag  unique per run
 * @returns {Promise<{ executes: number }>}
 */
export async function hostLikeRun({ client, base, trees, scratch, tag }) {
  let executes = 0;
  const lease = await client.env.acquireLease({ ...base, runId: `host-like-${tag}`, agentId: "bench" });
  const ws = lease.metadata.remoteCwd;
  const exec = (command, args = [], extra = {}) => {
    executes += 1;
    return client.env.execute({ ...base, lease, command, args, cwd: ws, timeoutMs: 60_000, ...extra }).then((result) => {
      if (result.exitCode !== 0) throw new Error(`${command} ${args.join(" ").slice(0, 80)}: exit ${result.exitCode ?? result.signal}: ${result.stderr.slice(0, 300)}`);
      return result;
    });
  };
  try {
    await client.env.realizeWorkspace({ ...base, lease, workspace: { remotePath: ws, mode: "shared_workspace" } });
    const rt = `${ws}/.paperclip-runtime`;
    // Preflight: git context, PATH, 8 uploads by stdin (base64, checksum), chmod, two `command -v`.
    await exec("sh", ["-c", "cat /etc/hosts >/dev/null; git rev-parse 2>/dev/null; true"]);
    await exec("sh", ["-c", 'printf "\\0%s\\0" "$PATH"']);
    const payload = Buffer.alloc(6 * 1024, 0x41).toString("base64");
    for (let i = 0; i < 8; i += 1) {
      await exec("sh", ["-c", `mkdir -p ${rt}/github && cat > ${rt}/github/f${i}.b64 && base64 -d < ${rt}/github/f${i}.b64 > ${rt}/github/f${i} && sha256sum ${rt}/github/f${i} >/dev/null`], {
        stdin: payload,
      });
    }
    await exec("sh", ["-c", `chmod 700 ${rt}/github/f0 && mkdir -p ${rt}/gh-config`]);
    await exec("sh", ["-c", "command -v sh"]);
    await exec("sh", ["-c", "command -v sh >/dev/null 2>&1"], { cwd: "/" });
    // Run start: four concurrent tar uploads, each with its post-upload extract.
    await Promise.all(
      trees.map((src, i) =>
        client.env.syncIn({
          ...base,
          lease,
          operations: [{ operationId: `run-${i}`, files: [{ sourcePath: src, targetPath: `${rt}/claude/up-${i}`, kind: "directory" }] }],
        }),
      ),
    );
    // Config, bridge upload by stdin, bridge start, readiness.
    await exec("sh", ["-c", `cp -R ${rt}/claude/up-0 ${rt}/claude/config`]);
    await exec("sh", ["-c", `mkdir -p ${rt}/bridge && cat > ${rt}/bridge/server.mjs`], { stdin: "x".repeat(30_000) });
    await exec("sh", ["-c", `mkdir -p ${rt}/q && nohup sh -c 'echo ready > ${rt}/q/ready.json; sleep 5' >/dev/null 2>&1 & echo $! > ${rt}/bridge.pid`]);
    await exec("sh", ["-c", `i=0; while [ ! -f ${rt}/q/ready.json ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; test -f ${rt}/q/ready.json`]);
    // The agent (stdin = the prompt) while the host polls the file bridge.
    const agent = exec("sh", ["-c", "cat >/dev/null; sleep 1; echo done"], { stdin: "the prompt" });
    for (let i = 0; i < 30; i += 1) await exec("sh", ["-c", `ls ${rt}/q/ >/dev/null; tail -c +1 ${rt}/q/ready.json >/dev/null`]);
    await agent;
    await exec("sh", ["-c", `kill "$(cat ${rt}/bridge.pid)" 2>/dev/null; true`]);
    const back = path.join(scratch, `host-like-back-${tag}`);
    await client.env.syncOut({ ...base, lease, operations: [{ operationId: "restore", files: [{ sourcePath: ws, targetPath: back, kind: "directory", exclude: [".paperclip-runtime"] }] }] });
    fs.rmSync(back, { recursive: true, force: true });
    await exec("rm", ["-rf", "--", `${rt}/github`]);
  } finally {
    await client.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  }
  return { executes };
}
