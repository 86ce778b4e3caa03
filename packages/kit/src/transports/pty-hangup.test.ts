// Closing a terminal as one that goes away, and the signals a terminal's kill takes.
import { describe, expect, it } from "vitest";
import type { PtySignal } from "../transport.js";
import { checkPtySignal, hangUpPty } from "./pty-hangup.js";

describe("hangUpPty", () => {
  it("sends SIGHUP and stops there when the program ends within the grace", async () => {
    const sent: string[] = [];
    let end!: () => void;
    const exited = new Promise<void>((resolve) => (end = resolve));
    const gone = await hangUpPty({ exited, signalGroup: async (signal) => void (sent.push(signal), end()), forceEnd: async () => void sent.push("force"), graceMs: 60_000 });
    expect(gone).toBe(true);
    expect(sent).toEqual(["SIGHUP"]);
  });

  it("uses the transport's hard end when the program outlives the grace, even if SIGHUP failed", async () => {
    const sent: string[] = [];
    const gone = await hangUpPty({
      exited: new Promise<void>(() => undefined),
      signalGroup: async (signal) => {
        sent.push(signal);
        throw new Error("channel gone");
      },
      forceEnd: async () => void sent.push("force"),
      graceMs: 1,
    });
    expect(gone).toBe(false);
    expect(sent).toEqual(["SIGHUP", "force"]);
  });
});

describe("checkPtySignal", () => {
  it("takes the four terminal signals and refuses others", () => {
    for (const signal of ["SIGINT", "SIGTERM", "SIGKILL", "SIGHUP"] as const) expect(checkPtySignal(signal)).toBe(signal);
    expect(() => checkPtySignal("SIGUSR1" as PtySignal)).toThrow(/PTY signal must be one of SIGINT, SIGTERM, SIGKILL, SIGHUP/);
  });
});
