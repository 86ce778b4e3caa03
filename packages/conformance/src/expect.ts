import assert from "node:assert/strict";
import type { PluginEnvironmentExecuteResult } from "@paperclipai/plugin-sdk";

/** Runner-agnostic assertions (node:assert) with messages that show what the provider returned. */
export { assert };

export function expectExit(result: PluginEnvironmentExecuteResult, exitCode: number, what: string): void {
  assert.equal(result.exitCode, exitCode, `${what}: expected exit ${exitCode}, got ${result.exitCode} (timedOut=${result.timedOut}) stderr=${JSON.stringify(result.stderr.slice(0, 2000))}`);
  assert.equal(result.timedOut, false, `${what}: timedOut should be false`);
}

export function expectOk(result: PluginEnvironmentExecuteResult, what: string): void {
  expectExit(result, 0, what);
}

/**
 * Single-quote for POSIX sh; used only for paths the suite itself builds. Deliberately not the kit's
 * `shellQuote`: the suite checks providers built on the kit, so it keeps its own oracle.
 */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
