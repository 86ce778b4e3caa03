// The root README's provider × feature grid is generated from the providers' built manifests
// (scripts/feature-grid.mjs); a grid edited by hand, or a manifest changed without regenerating it,
// fails here. Every provider package is built before the tests run (vitest's globalSetup).
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const SCRIPT = path.join(ROOT, "scripts", "feature-grid.mjs");
const run = promisify(execFile);

async function declared(): Promise<Array<{ driverKey: string; features: Record<string, boolean> }>> {
  const source = `const m = await import(${JSON.stringify(pathToFileURL(SCRIPT).href)}); process.stdout.write(JSON.stringify(await m.declaredFeatures()));`;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", source], { cwd: ROOT });
  return JSON.parse(stdout);
}

describe("the README's feature grid", () => {
  it("is exactly what the providers' manifests declare", async () => {
    const check = await run(process.execPath, [SCRIPT, "--check"], { cwd: ROOT }).catch((error: { code: number; stderr: string }) => error);
    expect("stderr" in check ? check.stderr : "").toBe("");
  }, 60_000);

  it("declares incrementalSessionOutput for every provider whose transport streams live output, and runnerWebSocketIngress for none", async () => {
    const rows = await declared();
    expect(rows.length).toBeGreaterThanOrEqual(11);
    // Daytona's declared transport is process/execute (output at the end; its session runner is an opt-in config).
    expect(rows.filter((r) => !r.features["`incrementalSessionOutput`"]).map((r) => r.driverKey)).toEqual(["daytona"]);
    expect(rows.filter((r) => r.features["`runnerWebSocketIngress`"]).map((r) => r.driverKey)).toEqual([]);
  }, 60_000);

  it("declares persistent sessions and independent control commands for every provider (each execute stands alone)", async () => {
    const rows = await declared();
    for (const key of ["`persistentProcessSessions`", "`independentControlCommands`"]) {
      expect(rows.filter((r) => !r.features[key]).map((r) => r.driverKey)).toEqual([]);
    }
  }, 60_000);
});
