// The suite must fail providers that break a rule, and skip (with reasons) what it is told to.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONFORMANCE_CASE_NAMES,
  ConformanceSkip,
  conformanceCases,
  findLocalLeftovers,
  startConformanceWorld,
  type ConformanceCaseName,
  type ConformanceOptions,
  type ConformanceWorld,
} from "./index.js";

const fixtureOptions: ConformanceOptions = {
  name: "local-fixture (broken)",
  pluginDir: fileURLToPath(new URL("./__fixtures__/local-plugin", import.meta.url)),
  driverKey: "local-fixture",
  config: { timeoutMs: 60_000 },
  invalidConfigs: [{ config: { timeoutMs: -1 }, error: /timeoutMs/ }],
};

function caseNamed(opts: ConformanceOptions, name: ConformanceCaseName) {
  const found = conformanceCases(opts).find((c) => c.name === name);
  if (!found) throw new Error(`no case ${name}`);
  return found;
}

describe("conformanceCases", () => {
  it("lists every case once, with nothing-left-behind last", () => {
    const names = conformanceCases(fixtureOptions).map((c) => c.name);
    expect(names).toEqual([...CONFORMANCE_CASE_NAMES]);
    expect(names.at(-1)).toBe("nothing-left-behind");
  });

  it("turns a declared skip into ConformanceSkip carrying the reason", async () => {
    const opts = { ...fixtureOptions, skip: { "sync-single-file-mode": "no native sync on this provider" } };
    const error = await caseNamed(opts, "sync-single-file-mode")
      .run({} as ConformanceWorld)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConformanceSkip);
    expect((error as ConformanceSkip).reason).toBe("no native sync on this provider");
  });
});

describe("declared-capabilities-match and incrementalSessionOutput", () => {
  // Only the declaration and the worker's methods are read: no lease, no worker.
  const worldDeclaring = (incrementalSessionOutput: boolean) =>
    ({ driver: { sandboxCapabilities: { incrementalSessionOutput } }, client: { supportedMethods: ["environmentExecute"] } }) as unknown as ConformanceWorld;

  it("fails a provider that declares it but skips execute-live-output", async () => {
    const opts = { ...fixtureOptions, skip: { "execute-live-output": "output arrives when the command ends" } };
    await expect(caseNamed(opts, "declared-capabilities-match").run(worldDeclaring(true))).rejects.toThrow(/incrementalSessionOutput is declared but execute-live-output is skipped/);
  });

  it("accepts the declaration when execute-live-output runs, and a provider without it that skips the case", async () => {
    await caseNamed(fixtureOptions, "declared-capabilities-match").run(worldDeclaring(true));
    const opts = { ...fixtureOptions, skip: { "execute-live-output": "output arrives when the command ends" } };
    await caseNamed(opts, "declared-capabilities-match").run(worldDeclaring(false));
  });
});

describe("a provider that breaks rules fails the matching cases", () => {
  let world: ConformanceWorld;
  const brokenOptions = { ...fixtureOptions, workerEnv: { LOCAL_FIXTURE_BREAK: "group-kill,mode,release-leaves-processes" } };

  beforeAll(async () => {
    world = await startConformanceWorld(brokenOptions);
  });
  afterAll(async () => {
    // The broken fixture leaks the timed-out command's sleeps; end them here.
    for (const entry of await findLocalLeftovers(world.leftoversContext)) {
      const pid = /^process (\d+)/.exec(entry)?.[1];
      try {
        if (pid) process.kill(Number(pid), "SIGKILL");
      } catch {
        // Ended meanwhile (one of its group went first).
      }
    }
    await world?.close();
  });

  it("execute-timeout-ends-process-group fails when only the leader is killed", async () => {
    await expect(caseNamed(brokenOptions, "execute-timeout-ends-process-group").run(world)).rejects.toThrow(/processes of the timed-out command survived/);
  });

  it("release-receipt-ends-every-process fails when the receipt comes while a setsid process still runs", async () => {
    await expect(caseNamed(brokenOptions, "release-receipt-ends-every-process").run(world)).rejects.toThrow(/still running right after the destroyed receipt: .*paperclip-conformance-\w+-setsid/);
  });

  it("sync-single-file-mode fails when the mode is ignored", async () => {
    await expect(caseNamed(brokenOptions, "sync-single-file-mode").run(world)).rejects.toThrow(/mode 0600/);
  });

  it("skips resume without reuseConfig and leftovers without a probe, saying why", async () => {
    await expect(caseNamed(brokenOptions, "resume-reusable-lease").run(world)).rejects.toThrow(/no reuseConfig given/);
    await expect(caseNamed(brokenOptions, "nothing-left-behind").run(world)).rejects.toBeInstanceOf(ConformanceSkip);
  });

  it("a validate case fails when the expected error does not name the field", async () => {
    const opts = { ...brokenOptions, invalidConfigs: [{ config: { timeoutMs: -1 }, error: /imageName/ }] };
    await expect(caseNamed(opts, "validate-bad-configs").run(world)).rejects.toThrow(/no error matches/);
  });
});

describe("a hosted-style provider that breaks rules fails the matching cases", () => {
  let world: ConformanceWorld;
  const brokenOptions = { ...fixtureOptions, workerEnv: { LOCAL_FIXTURE_BREAK: "wait-for-stdout,late-expiry" } };

  beforeAll(async () => {
    world = await startConformanceWorld(brokenOptions);
  });
  afterAll(async () => {
    for (const entry of await findLocalLeftovers(world.leftoversContext)) {
      const pid = /^process (\d+)/.exec(entry)?.[1];
      try {
        if (pid) process.kill(Number(pid), "SIGKILL");
      } catch {
        // Ended meanwhile (one of its group went first).
      }
    }
    await world?.close();
  });

  it("background-child-holding-stdout fails when the result waits for the child", async () => {
    // The broken provider's result comes only when the command's 20 s timeout ends it.
    await expect(caseNamed(brokenOptions, "background-child-holding-stdout").run(world)).rejects.toThrow(/it waited for the child until its timeout/);
  }, 120_000);

  it("expiry-within-requested fails when the lease outlives the requested deadline", async () => {
    await expect(caseNamed(brokenOptions, "expiry-within-requested").run(world)).rejects.toThrow(/is after the requested/);
  });
});
