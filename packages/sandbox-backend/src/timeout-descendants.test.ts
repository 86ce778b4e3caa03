// A timed-out command ends with everything it started, whatever session or group it moved to
// (issue #27): processes that `setsid` away, are orphaned by a double fork (`setsid -f`, a subshell),
// or ignore SIGTERM, are gone when the command's result comes back, not only at release. Looked at
// from the host, right after the result. A command that completes keeps its background processes.
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostProcessesMatching, startWorld, type World } from "./__fixtures__/world.js";
import type { Sandbox } from "./types.js";

let world: World;
let sandbox: Sandbox;
beforeAll(async () => {
  world = startWorld();
  sandbox = await world.create({ id: "timeouts" });
});
afterAll(async () => {
  await world?.close();
});

/** Host processes whose argv contains `needle`, as "pid argv" (what is left, readably). */
const left = (needle: string) =>
  hostProcessesMatching(needle).map((pid) => {
    try {
      return `${pid} ${fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ")} ppid=${fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[1]}`;
    } catch {
      return `${pid} (gone)`;
    }
  });

const tag = () => String(700_000 + Math.floor(Math.random() * 99_999));

/** Starts one process that escapes in each way a command's process can; each sleeps `<tag><n>`. */
const ESCAPES = (t: string) =>
  [
    `setsid sleep ${t}1 >/dev/null 2>&1 &`,
    `setsid -f sleep ${t}2 >/dev/null 2>&1`,
    `(setsid sh -c 'sleep ${t}3' >/dev/null 2>&1 &)`,
    `(trap '' TERM; exec setsid sleep ${t}4) >/dev/null 2>&1 &`,
    `nohup sleep ${t}5 >/dev/null 2>&1 &`,
  ].join("\n");

async function waitForEscapes(t: string): Promise<void> {
  for (const until = Date.now() + 5_000; hostProcessesMatching(`sleep ${t}`).length < 5 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
  expect(hostProcessesMatching(`sleep ${t}`).length).toBeGreaterThanOrEqual(5);
}

describe("a timeout ends every process the command started", () => {
  it("runner: setsid, setsid -f, an orphan in its own session and a TERM-ignoring one are gone when the result comes back", async () => {
    const t = tag();
    const watching = (async () => {
      await new Promise((r) => setTimeout(r, 300));
      await waitForEscapes(t);
    })();
    const exit = await sandbox.runner.run(`${ESCAPES(t)}\nsleep 30`, { timeoutMs: 1_500, killGraceMs: 200 });
    await watching;
    expect(exit.reason).toBe("timeout");
    expect(left(`sleep ${t}`)).toEqual([]);
  });

  it("exec handle: the same, and the command's shell still reports the SIGTERM that ended it", async () => {
    const t = tag();
    const handle = await sandbox.exec({ script: `${ESCAPES(t)}\nsleep 30`, timeoutMs: 1_500, killGraceMs: 200 });
    await waitForEscapes(t);
    expect(await handle.exited).toEqual({ exitCode: null, signal: "SIGTERM", timedOut: true });
    expect(left(`sleep ${t}`)).toEqual([]);
  });

  it("a command that completes leaves its background processes running, also those in a session of their own", async () => {
    const t = tag();
    const exit = await sandbox.runner.run(ESCAPES(t), { timeoutMs: 10_000 });
    expect(exit).toMatchObject({ exitCode: 0, reason: "exit" });
    await waitForEscapes(t);
    await sandbox.runner.run(`pkill -f 'sleep ${t}' ; true`, {});
  });
});
