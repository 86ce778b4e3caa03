import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { endMarkedProcesses, findMarkedProcesses } from "./process-marker.js";

const MARKER = "PAPERCLIP_KIT_TEST_MARKER";

async function waitFor(check: () => boolean, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await sleep(20);
  }
}

describe("process markers", () => {
  it("finds and ends every marked process, setsid and nohup children included, and nothing else", async () => {
    const value = randomUUID();
    const other = randomUUID();
    const start = (v: string) =>
      spawn("sh", ["-c", "setsid sleep 300 & nohup sleep 300 >/dev/null 2>&1 & sleep 300 & wait"], {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", [MARKER]: v },
        detached: true,
        stdio: "ignore",
      });
    const marked = start(value);
    const bystander = start(other);
    try {
      await waitFor(() => findMarkedProcesses(MARKER, value).length === 4 && findMarkedProcesses(MARKER, other).length === 4);
      await endMarkedProcesses(MARKER, value);
      expect(findMarkedProcesses(MARKER, value)).toEqual([]);
      expect(findMarkedProcesses(MARKER, other)).toHaveLength(4);
    } finally {
      await endMarkedProcesses(MARKER, value);
      await endMarkedProcesses(MARKER, other);
      marked.unref();
      bystander.unref();
    }
    expect(findMarkedProcesses(MARKER, other)).toEqual([]);
  });
});
