import type { PluginEnvironmentDiagnostic } from "@paperclipai/plugin-sdk";
import { CliFailure, describeError } from "../errors.js";
import { err, out } from "../io.js";
import { prepareProvider, startSession, type PreparedProvider } from "../provider-setup.js";
import type { ProviderSession } from "../provider-session.js";

function formatDiagnostic(d: PluginEnvironmentDiagnostic): string {
  return `  [${d.severity}] ${d.message}${d.code ? ` (${d.code})` : ""}`;
}

async function withSession<T>(prepared: PreparedProvider, work: (session: ProviderSession) => Promise<T>): Promise<T> {
  const session = await startSession(prepared);
  try {
    return await work(session);
  } catch (error) {
    throw new CliFailure(`${prepared.provider.driverKey}: ${prepared.redactor.redact(describeError(error))}`);
  } finally {
    await session.close();
  }
}

/** `validate`: the provider's verdict on the config. Exit 0 valid, 1 invalid. */
export async function validateCommand(values: Record<string, unknown>): Promise<number> {
  const prepared = await prepareProvider(values);
  const { redactor } = prepared;
  const result = await withSession(prepared, (session) => session.validateConfig());
  if (values.json === true) {
    out(`${JSON.stringify(redactor.redactDeep({ driverKey: prepared.provider.driverKey, ...result }), null, 2)}\n`);
  } else {
    const lines = [`validate ${prepared.provider.driverKey}: ${result.ok ? "PASS" : "FAIL"}`];
    for (const e of result.errors ?? []) lines.push(`  [error] ${e}`);
    for (const w of result.warnings ?? []) lines.push(`  [warning] ${w}`);
    out(`${redactor.redact(lines.join("\n"))}\n`);
  }
  return result.ok ? 0 : 1;
}

/** `probe`: validate, then ask the provider whether it can run here. Exit 0 pass, 1 fail. */
export async function probeCommand(values: Record<string, unknown>): Promise<number> {
  const prepared = await prepareProvider(values);
  const { redactor } = prepared;
  const driverKey = prepared.provider.driverKey;
  const report = await withSession(prepared, async (session) => {
    const validation = await session.validateConfig();
    if (!validation.ok) {
      return {
        ok: false,
        summary: "config rejected by validateConfig",
        diagnostics: (validation.errors ?? []).map((message) => ({ severity: "error" as const, message, code: "invalid_config" })),
      };
    }
    if (validation.normalizedConfig) session.config = validation.normalizedConfig;
    return session.probe();
  });
  if (values.json === true) {
    out(`${JSON.stringify(redactor.redactDeep({ driverKey, ...report }), null, 2)}\n`);
  } else {
    const lines = [`probe ${driverKey}: ${report.ok ? "PASS" : "FAIL"}${report.summary ? ` (${report.summary})` : ""}`];
    for (const d of report.diagnostics ?? []) lines.push(formatDiagnostic(d));
    out(`${redactor.redact(lines.join("\n"))}\n`);
  }
  if (!report.ok && values.json !== true) {
    const first = report.diagnostics?.find((d) => d.severity === "error");
    if (first) err(`paperclip-sandbox: probe failed: ${redactor.redact(first.message)}\n`);
  }
  return report.ok ? 0 : 1;
}
