import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { encodeChannelBytes } from "@paperclipai/plugin-sdk";
import { afterAll, describe, expect, it } from "vitest";
import { createLocalScriptRunner } from "../exec/local/local-runner.js";
import { isZombieOrGone } from "../exec/local/proc-stat.js";
import { STREAM_TRANSPORT, type ScriptRunner } from "../transport.js";
import { createDuplexChannels, DuplexChannelError, type DuplexChannels } from "./duplex-channels.js";

// Mechanics only: a local runner in a temp dir stands in for a sandbox (providers run the same
// module over their own transport and pass the conformance case `duplex-channel`).
const dir = mkdtempSync(path.join(os.tmpdir(), "kit-duplex-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const local = createLocalScriptRunner({ cwd: dir, env: { PATH: "/usr/bin:/bin" } });

interface Recorded {
  data: Map<string, Buffer>;
  exits: Array<{ route: string; session: string; code: number | null; transportClosed?: boolean }>;
}

function setup(runner: ScriptRunner = local, leaseSignal?: AbortSignal) {
  const rec: Recorded = { data: new Map(), exits: [] };
  const logs: string[] = [];
  const channels = createDuplexChannels({
    runnerFor: async (scope) => {
      if (scope.providerLeaseId !== "lease-1") throw new Error(`lease ${scope.providerLeaseId} is not running`);
      return { runner, leaseSignal };
    },
    notify: () => ({
      data: (route, session, chunk) => rec.data.set(`${route}/${session}`, Buffer.concat([rec.data.get(`${route}/${session}`) ?? Buffer.alloc(0), Buffer.from(chunk)])),
      exit: (route, session, code, transportClosed) => rec.exits.push({ route, session, code, transportClosed }),
    }),
    log: (line) => logs.push(line),
    stopGraceMs: 200,
  });
  return { channels, rec, logs };
}

const scope = { driverKey: "d", companyId: "c", environmentId: "e", providerLeaseId: "lease-1" };

async function until(cond: () => boolean, what: string, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function open(channels: DuplexChannels, hostRouteId: string, command: string[]) {
  return channels.open({ ...scope, hostRouteId, command });
}

describe("createDuplexChannels", () => {
  it("pipes every byte value both ways, in order, and reports the exit once", async () => {
    const { channels, rec } = setup();
    const { hostRouteId, workerSessionId } = await open(channels, "route-1", ["cat"]);
    expect(hostRouteId).toBe("route-1");
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const big = Buffer.alloc(3 * 1024 * 1024, 0x5a);
    await channels.write({ hostRouteId, workerSessionId, data: encodeChannelBytes(all) });
    await channels.write({ hostRouteId, workerSessionId, data: encodeChannelBytes(big) });
    const key = `${hostRouteId}/${workerSessionId}`;
    await until(() => (rec.data.get(key)?.length ?? 0) === all.length + big.length, "the echo");
    expect(rec.data.get(key)!.equals(Buffer.concat([all, big]))).toBe(true);

    const closed = await channels.close({ hostRouteId });
    expect(closed).toEqual({ hostRouteId, workerSessionId });
    expect(rec.exits).toHaveLength(1);
    expect(rec.exits[0]).toMatchObject({ route: hostRouteId, session: workerSessionId });
    expect(channels.size).toBe(0);
  });

  it("never lets a shell parse the argv: metacharacters arrive literally", async () => {
    const { channels, rec } = setup();
    const hostile = "$(echo injected); echo injected `echo injected` > owned";
    const { hostRouteId, workerSessionId } = await open(channels, "route-q", ["printf", "%s|", hostile, "two words"]);
    await until(() => rec.exits.length === 1, "the exit");
    expect(rec.data.get(`${hostRouteId}/${workerSessionId}`)?.toString()).toBe(`${hostile}|two words|`);
    expect(rec.exits[0]!.code).toBe(0);
  });

  it("keeps stderr out of the stream and logs its tail when the command fails", async () => {
    const { channels, rec, logs } = setup();
    const { hostRouteId, workerSessionId } = await open(channels, "route-e", ["sh", "-c", "printf out; echo boom >&2; exit 3"]);
    await until(() => rec.exits.length === 1, "the exit");
    expect(rec.data.get(`${hostRouteId}/${workerSessionId}`)?.toString()).toBe("out");
    expect(rec.exits[0]!.code).toBe(3);
    expect(logs.join("\n")).toMatch(/exited 3: boom/);
  });

  it("scrubs secrets of the launch command out of what it logs", async () => {
    const { channels, rec, logs } = setup();
    const token = "s3cr3t-bridge-token-value";
    await open(channels, "route-secret", ["sh", "-c", `exec env PAPERCLIP_BRIDGE_TOKEN='${token}' sh -c 'echo "bad token $PAPERCLIP_BRIDGE_TOKEN" >&2; exit 1'`]);
    await until(() => rec.exits.length === 1, "the exit");
    expect(logs.join("\n")).toMatch(/exited 1: bad token \[REDACTED\]/);
    expect(logs.join("\n")).not.toContain(token);
  });

  it("stop ends the command's whole process group; later writes are refused", async () => {
    const { channels, rec } = setup();
    const pidFile = path.join(dir, "bg.pid");
    const { hostRouteId, workerSessionId } = await open(channels, "route-s", ["sh", "-c", `sleep 60 & echo $! > '${pidFile}'; cat`]);
    await until(() => {
      try {
        return Number(readFileSync(pidFile, "utf8")) > 0;
      } catch {
        return false;
      }
    }, "the background pid");
    const bg = Number(readFileSync(pidFile, "utf8"));
    await channels.stop({ hostRouteId, workerSessionId });
    await until(() => rec.exits.length === 1, "the exit after stop");
    await until(() => isZombieOrGone(bg), "the background process to end");
    await expect(channels.write({ hostRouteId, workerSessionId, data: encodeChannelBytes(Buffer.from("x")) })).rejects.toBeInstanceOf(DuplexChannelError);
    // Closing after the exit is still acknowledged (the host's close is authoritative and idempotent).
    expect(await channels.close({ hostRouteId })).toEqual({ hostRouteId });
  });

  it("refuses a wrong session, a reused route, bad bytes, bad argv and an unknown lease", async () => {
    const { channels } = setup();
    const { hostRouteId, workerSessionId } = await open(channels, "route-r", ["cat"]);
    await expect(channels.write({ hostRouteId, workerSessionId: "other", data: "" })).rejects.toThrow(/no open duplex channel/);
    await expect(channels.stop({ hostRouteId: "nope", workerSessionId })).rejects.toThrow(/no open duplex channel/);
    await expect(open(channels, "route-r", ["cat"])).rejects.toThrow(/already open/);
    // Two opens racing on one new route: exactly one wins.
    const raced = await Promise.allSettled([open(channels, "route-race", ["cat"]), open(channels, "route-race", ["cat"])]);
    expect(raced.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    await channels.close({ hostRouteId: "route-race" });
    await expect(channels.write({ hostRouteId, workerSessionId, data: "%%%not base64" })).rejects.toThrow(/base64/);
    await expect(open(channels, "route-x", [])).rejects.toThrow(/non-empty argv/);
    await expect(open(channels, "route-x", ["cat", "a\0b"])).rejects.toThrow(/NUL/);
    await expect(open(channels, "route-x", ["cat", 3 as unknown as string])).rejects.toThrow(/string/);
    await expect(channels.open({ ...scope, providerLeaseId: "lease-2", hostRouteId: "route-y", command: ["cat"] })).rejects.toThrow(/not running/);
    await channels.close({ hostRouteId });
    expect(channels.size).toBe(0);
  });

  it("ends the channel when its lease is released", async () => {
    const release = new AbortController();
    const { channels, rec } = setup(local, release.signal);
    await open(channels, "route-l", ["cat"]);
    release.abort();
    await until(() => rec.exits.length === 1, "the exit after release");
    expect(channels.size).toBe(0);
    await expect(open(channels, "route-l2", ["cat"])).rejects.toThrow(/being released/);
  });

  it("splits a large output chunk into notifications the host accepts (<= 64 KiB each)", async () => {
    const big = Buffer.alloc(1024 * 1024 + 7, 0x41);
    const oneChunk: ScriptRunner = {
      capabilities: STREAM_TRANSPORT,
      run: async (_script, io) => {
        if (typeof io.stdout === "function") io.stdout(big);
        return { exitCode: 0, signal: null, reason: "exit" };
      },
    };
    const sizes: number[] = [];
    const channels = createDuplexChannels({
      runnerFor: async () => ({ runner: oneChunk }),
      notify: () => ({ data: (_r, _s, chunk) => sizes.push(chunk.byteLength), exit: () => undefined }),
    });
    await channels.open({ ...scope, hostRouteId: "route-big", command: ["cat"] });
    await until(() => channels.size === 0, "the channel to end");
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(big.length);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(64 * 1024);
  });

  it("reports a broken transport as transportClosed, not as a process exit", async () => {
    const broken: ScriptRunner = { capabilities: STREAM_TRANSPORT, run: () => Promise.reject(new Error("sandbox connection lost")) };
    const { channels, rec, logs } = setup(broken);
    const { hostRouteId, workerSessionId } = await open(channels, "route-t", ["cat"]);
    await until(() => rec.exits.length === 1, "the transport exit");
    expect(rec.exits[0]).toEqual({ route: hostRouteId, session: workerSessionId, code: null, transportClosed: true });
    expect(logs.join("\n")).toMatch(/transport lost: sandbox connection lost/);
  });
});
