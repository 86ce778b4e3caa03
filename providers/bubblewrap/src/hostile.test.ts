// Hostile-workload tests: what sandboxed code must not be able to do. Drives the built worker.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, hostProcessesMatching, startHarness, type Harness } from "./test-support/harness.js";
import { isStopped, startHttpServer, startHttpsServer, supervisorPidOf, type TestServer } from "@paperclip-sandbox/sandbox-backend/test-support";

const isRoot = process.getuid?.() === 0;
const WORKER_SECRET = "sk-test-worker-secret-do-not-leak-0123456789";

let h: Harness;
let https: TestServer;
let plain: TestServer;
let hostSecretDir: string;

beforeAll(async () => {
  https = await startHttpsServer("127.0.0.1", "hello-from-granted");
  plain = await startHttpServer("127.0.0.1", "plain-granted");
  hostSecretDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-host-secret-"));
  fs.writeFileSync(path.join(hostSecretDir, "secret.txt"), "host-secret");
  h = await startHarness({
    env: {
      // The "internet": granted.test and denied.test both point at the loopback test servers.
      PAPERCLIP_BUBBLEWRAP_RESOLVE: "granted.test=127.0.0.1,denied.test=127.0.0.1",
      // The host hands provider workers API keys; none may reach the sandbox.
      ANTHROPIC_API_KEY: WORKER_SECRET,
    },
  });
});

afterAll(async () => {
  await h?.close();
  await https?.close();
  await plain?.close();
  fs.rmSync(hostSecretDir, { recursive: true, force: true });
});

describe("filesystem isolation", () => {
  it("only /workspace, the home, its cache and /tmp are writable", async () => {
    const lease = await h.acquire();
    const targets = ["/x", "/usr/x", "/usr/bin/x", "/etc/x", "/etc/passwd", "/opt/paperclip/supervisor.mjs", "/opt/paperclip/in-jail/main.mjs", "/opt/x", "/run/x", "/home/x", "/sys/x"];
    const script =
      targets.map((t) => `if (echo pwned > ${t}) 2>/dev/null; then echo "WROTE ${t}"; fi`).join("\n") +
      '\nfor d in /workspace /home/sandbox /home/sandbox/.cache /tmp; do echo ok > $d/probe && echo "writable $d"; done';
    const result = await h.sh(lease, script);
    expect(result.stdout).not.toContain("WROTE");
    expect(result.stdout).toBe("writable /workspace\nwritable /home/sandbox\nwritable /home/sandbox/.cache\nwritable /tmp\n");
    // A read-only bind cannot be remounted writable: the sandbox has no capabilities.
    // Host kernel settings stay out of reach, even when the worker (and so the sandbox's host uid) is root.
    const sysctl = await h.sh(
      lease,
      "v=$(cat /proc/sys/vm/swappiness); (echo $v > /proc/sys/vm/swappiness) 2>/dev/null && echo SYSCTL-WRITABLE; (echo x > /proc/sys/kernel/hostname) 2>/dev/null && echo HOSTNAME-WRITABLE; echo done",
    );
    expect(sysctl.stdout).toBe("done\n");
    const remount = await h.sh(lease, "mount -o remount,bind,rw /usr 2>&1; grep Cap /proc/self/status");
    expect(remount.stdout).toMatch(/CapEff:\s+0000000000000000/);
    expect(remount.stdout).toMatch(/CapBnd:\s+0000000000000000/);
    await h.release(lease);
  });

  it("hides /root, /home, the host /tmp, the plugin's files and the worker's environment", async () => {
    const lease = await h.acquire();
    const pluginDist = path.resolve("providers/bubblewrap/dist");
    const result = await h.sh(
      lease,
      [
        "ls -A /root 2>/dev/null && echo ROOT-VISIBLE",
        "ls -A /home",
        `cat ${hostSecretDir}/secret.txt 2>/dev/null && echo HOST-TMP-VISIBLE`,
        `ls ${pluginDist} 2>/dev/null && echo PLUGIN-VISIBLE`,
        "ls /work 2>/dev/null && echo WORK-VISIBLE",
        `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ${WORKER_SECRET.slice(0, 12)} || true`,
        "id -u; id -un; hostname",
      ].join("\n"),
    );
    expect(result.stdout).toBe("sandbox\n0\n1000\nsandbox\nsandbox\n");
    expect(JSON.stringify(result)).not.toContain(WORKER_SECRET);
    await h.release(lease);
  });
});

describe("egress", () => {
  it("has no network without a grant: only loopback, no DNS, no proxy, and the kit's note", async () => {
    const lease = await h.acquire();
    const result = await h.sh(
      lease,
      [
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '",
        "env | grep -ci proxy || true",
        `curl -sS --max-time 3 http://127.0.0.1:${plain.port}/ 2>&1 | head -1`,
        "echo PAPERCLIP_NETWORK_EGRESS_POLICY=$PAPERCLIP_NETWORK_EGRESS_POLICY",
        `curl -sS --max-time 3 https://granted.test:${https.port}/`,
      ].join("\n"),
    );
    expect(result.stdout).toMatch(/^lo\n0\ncurl: \(7\) Failed to connect to 127\.0\.0\.1 port \d+.*\nPAPERCLIP_NETWORK_EGRESS_POLICY=deny-all\n$/);
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/Could not resolve host: granted\.test/);
    expect(result.stderr).toMatch(/\[paperclip\].*executionWorkspaceSettings\.networkEgress.*no grant is set/);
    await h.release(lease);
  });

  it("reaches a granted name through the proxy from curl and node; refuses other names and raw IPs", async () => {
    const lease = await h.acquire({ executionWorkspaceSettings: { networkEgress: { allowFqdns: ["granted.test"] } } });
    const env = await h.sh(lease, "env | grep -E '^(HTTPS_PROXY|NO_PROXY|PAPERCLIP_NETWORK_EGRESS_ALLOW_FQDNS)=' | sort");
    expect(env.stdout).toBe("HTTPS_PROXY=http://127.0.0.1:3128\nNO_PROXY=localhost,127.0.0.1,::1\nPAPERCLIP_NETWORK_EGRESS_ALLOW_FQDNS=granted.test\n");

    const curl = await h.sh(lease, `curl -sS -k --max-time 5 https://granted.test:${https.port}/`);
    expect(curl).toMatchObject({ exitCode: 0, stdout: "hello-from-granted" });
    const plainHttp = await h.sh(lease, `curl -sS --max-time 5 http://granted.test:${plain.port}/`);
    expect(plainHttp.stdout).toBe(`plain-granted host=granted.test:${plain.port}`);

    // Node does not read HTTPS_PROXY by itself (before v24): the script CONNECTs through it as agents do.
    const nodeScript = `
      const http = require("http"), tls = require("tls");
      const proxy = new URL(process.env.HTTPS_PROXY);
      const req = http.request({ host: proxy.hostname, port: proxy.port, method: "CONNECT", path: "granted.test:${https.port}" });
      req.on("connect", (res, socket) => {
        if (res.statusCode !== 200) { console.log("status " + res.statusCode); return; }
        const s = tls.connect({ socket, servername: "granted.test", rejectUnauthorized: false }, () =>
          s.write("GET / HTTP/1.1\\r\\nHost: granted.test\\r\\nConnection: close\\r\\n\\r\\n"));
        let body = ""; s.on("data", (d) => (body += d)); s.on("end", () => console.log(body.split("\\r\\n\\r\\n")[1]));
      });
      req.end();`;
    const node = await h.client.env.execute({ ...h.base(), lease, command: "node", args: ["-e", nodeScript] });
    expect(node).toMatchObject({ exitCode: 0, stdout: "hello-from-granted\n" });

    const denied = await h.sh(lease, `curl -sS -k --max-time 5 https://denied.test:${https.port}/`);
    expect(denied.exitCode).not.toBe(0);
    expect(denied.stderr).toMatch(/403/);
    expect(denied.stderr).toMatch(/\[paperclip\] the sandbox egress proxy refused .*denied\.test.*not in the egress grant/);

    // (A loopback IP is in NO_PROXY and stays inside the jail; a raw outside address goes to the proxy.)
    const rawIp = await h.sh(lease, `curl -sS -k --max-time 5 https://192.0.2.10:${https.port}/`);
    expect(rawIp.exitCode).not.toBe(0);
    expect(rawIp.stderr).toMatch(/address 192\.0\.2\.10 is not inside an allowed CIDR/);

    // Bypassing the proxy gets nowhere: the jail has no route out.
    const direct = await h.sh(lease, `curl -sS --noproxy '*' --max-time 3 https://granted.test:${https.port}/`);
    expect(direct.exitCode).not.toBe(0);
    await h.release(lease);
  });
});

describe("process and resource containment", () => {
  it("ends the jail at expiry even when its supervisor is stopped", async () => {
    const lease = await h.acquire({ requestedExpiresAt: new Date(Date.now() + 2_500).toISOString() });
    const tag = String(800_000 + Math.floor(Math.random() * 99_999));
    await h.sh(lease, `nohup sleep ${tag} >/dev/null 2>&1 &`);
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${tag}`),
        (pids) => pids.length > 0,
      ),
    ).not.toEqual([]);
    // Sandboxed code cannot stop it any more (supervisor-attacks.test.ts); stopped from the host
    // here, as a hung supervisor would be: the host-side keeper still ends the jail at its expiry.
    const supervisor = supervisorPidOf(path.join(h.stateDir, "leases", lease.providerLeaseId!))!;
    process.kill(supervisor, "SIGSTOP");
    expect(await eventually(() => isStopped(supervisor), Boolean)).toBe(true);
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${tag}`),
        (pids) => pids.length === 0,
        8_000,
      ),
    ).toEqual([]);
    await h.client.env.destroyLease({ ...h.base(), providerLeaseId: lease.providerLeaseId });
  });

  it.skipIf(!isRoot)("contains a fork bomb with a pids limit, without hurting the host or another lease", async () => {
    const limited = { ...h.config, pids: 64 };
    const bombed = await h.acquire({}, limited);
    const neighbour = await h.acquire();
    const bomb = h.client.env.execute({ ...h.base(limited), lease: bombed, command: "sh", args: ["-c", "b() { b | b & }; b; sleep 60"], timeoutMs: 15_000 });
    let bombEnded = false;
    void bomb.then(
      () => (bombEnded = true),
      () => (bombEnded = true),
    );
    await new Promise((resolve) => setTimeout(resolve, 800));
    const other = await h.sh(neighbour, "echo neighbour-ok");
    expect(other.stdout).toBe("neighbour-ok\n");
    // The neighbour answered while the bomb still ran (not a time window: the bomb runs to its 15 s timeout).
    expect(bombEnded).toBe(false);
    const result = await bomb;
    expect(result.timedOut).toBe(true);
    // The bombed lease recovers once its command's group is gone.
    const after = await eventually(
      () => h.client.env.execute({ ...h.base(limited), lease: bombed, command: "echo", args: ["alive"] }),
      (r) => r.stdout === "alive\n",
      10_000,
    );
    expect(after.stdout).toBe("alive\n");
    await h.client.env.releaseLease({ ...h.base(limited), providerLeaseId: bombed.providerLeaseId });
    await h.release(neighbour);
  });

  it.skipIf(!isRoot)("OOM-kills a memory hog at memoryMb while the lease and a neighbour keep working", async () => {
    const limited = { ...h.config, memoryMb: 96 };
    const hog = await h.acquire({}, limited);
    const neighbour = await h.acquire();
    const result = await h.client.env.execute({
      ...h.base(limited),
      lease: hog,
      command: "node",
      args: ["-e", "const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1));"],
      timeoutMs: 20_000,
    });
    expect(result.timedOut).toBe(false);
    expect(result.signal).toBe("SIGKILL");
    const still = await h.client.env.execute({ ...h.base(limited), lease: hog, command: "echo", args: ["still-here"] });
    expect(still.stdout).toBe("still-here\n");
    expect((await h.sh(neighbour, "echo neighbour-ok")).stdout).toBe("neighbour-ok\n");
    await h.client.env.releaseLease({ ...h.base(limited), providerLeaseId: hog.providerLeaseId });
    await h.release(neighbour);
  });

  it.skipIf(!isRoot)("a disk filler with diskMb 64 gets ENOSPC inside the sandbox at 64 MiB; the host's filesystem takes no more", async () => {
    const limited = { ...h.config, diskMb: 64 };
    const lease = await h.acquire({}, limited);
    const leaseDir = path.join(h.stateDir, "leases", lease.providerLeaseId!);
    const result = await h.client.env.execute({
      ...h.base(limited),
      lease,
      command: "sh",
      args: ["-c", 'head -c 268435456 /dev/zero > /workspace/fill; echo "exit $?"; head -c 1048576 /dev/zero > /tmp/more; du -sm /workspace/fill | cut -f1'],
      timeoutMs: 60_000,
    });
    expect(result.stderr).toMatch(/No space left on device/);
    const [status, writtenMb] = result.stdout.trim().split("\n");
    expect(status).toBe("exit 1");
    expect(Number(writtenMb)).toBeLessThanOrEqual(64);
    // Everything it wrote is inside its own (sparse) filesystem image: at most its 64 MiB on the host.
    const image = fs.statSync(path.join(leaseDir, "disk.img"));
    expect(image.blocks * 512).toBeLessThanOrEqual(65 * 1024 * 1024);
    const hostSide = fs.readdirSync(path.join(leaseDir, "disk"));
    expect(hostSide.sort()).toEqual(["cache", "home", "tmp", "workspace"]);
    await h.client.env.releaseLease({ ...h.base(limited), providerLeaseId: lease.providerLeaseId });
    expect(fs.existsSync(leaseDir)).toBe(false);
  });
});
