import { randomUUID } from "node:crypto";
import type { PluginEnvironmentDiagnostic, PluginEnvironmentProbeParams, PluginEnvironmentProbeResult } from "@paperclipai/plugin-sdk";
import type { z } from "zod";
import { closeCommandChannel, settledCommandChannel } from "../transports/command-channel/index.js";
import { createWithinBudget, destroyConfirmed, planAcquire } from "../provider/acquire.js";
import type { SandboxHandle, SandboxProviderDefinition } from "../provider/types.js";
import { makeWorkspace } from "../provider/workspace.js";

/**
 * The probe for providers without their own: create a small sandbox as an acquire would, run one
 * command in it, destroy it, and report each step with a code. Nothing is left behind, whatever fails.
 */
export async function defaultProbe<S extends z.ZodObject, H extends SandboxHandle>(
  def: SandboxProviderDefinition<S, H>,
  config: z.output<S>,
  params: PluginEnvironmentProbeParams,
): Promise<PluginEnvironmentProbeResult> {
  const diagnostics: PluginEnvironmentDiagnostic[] = [];
  const acquire = { ...params, runId: `probe-${randomUUID()}` };
  const plan = { ...planAcquire(def, config, acquire), reusable: false };
  let handle: H | undefined;
  let ok = false;
  try {
    const started = Date.now();
    handle = await createWithinBudget(
      def,
      config,
      acquire,
      plan,
      () => undefined,
      (made, signal) => makeWorkspace(def.workspace, made, config, () => def.runner(made, config), signal).then(() => undefined),
    );
    diagnostics.push({ severity: "info", code: "PROBE_CREATE_OK", message: `created sandbox ${handle.providerLeaseId} in ${Date.now() - started} ms` });
    const out: Buffer[] = [];
    const exit = await def.runner(handle, config).run("echo paperclip-probe-ok", { stdout: (chunk) => out.push(chunk) });
    if (exit.exitCode === 0 && Buffer.concat(out).toString("utf8").includes("paperclip-probe-ok")) {
      diagnostics.push({ severity: "info", code: "PROBE_EXEC_OK", message: "a command ran in the sandbox" });
      ok = true;
      // A runner with a command channel started it beside that command: report what the sandbox runs.
      const channel = await settledCommandChannel(handle.providerLeaseId);
      if (channel.state === "ready") {
        diagnostics.push({ severity: "info", code: "PROBE_COMMAND_CHANNEL", message: `command channel: ${channel.implementation} in the sandbox (commands after the first skip the vendor's exec)` });
      } else if (channel.state !== "none") {
        diagnostics.push({
          severity: "warning",
          code: "PROBE_COMMAND_CHANNEL_UNAVAILABLE",
          message: `no command channel (${channel.reason ?? channel.state}): every command is a vendor exec of its own`,
        });
      }
    } else {
      diagnostics.push({ severity: "error", code: "PROBE_EXEC_FAILED", message: `a command in the sandbox ended with ${exit.exitCode ?? exit.signal}` });
    }
  } catch (error) {
    diagnostics.push({ severity: "error", code: handle ? "PROBE_EXEC_FAILED" : "PROBE_CREATE_FAILED", message: (error as Error).message });
  } finally {
    if (handle) {
      await closeCommandChannel(handle.providerLeaseId);
      const ref = { providerLeaseId: handle.providerLeaseId, config, metadata: {}, companyId: params.companyId, environmentId: params.environmentId };
      try {
        await destroyConfirmed(def, ref, handle, plan);
        diagnostics.push({ severity: "info", code: "PROBE_DESTROY_OK", message: "the probe sandbox was destroyed" });
      } catch (error) {
        ok = false;
        diagnostics.push({ severity: "error", code: "PROBE_DESTROY_FAILED", message: (error as Error).message });
      }
    }
  }
  const firstError = diagnostics.find((d) => d.severity === "error");
  const warnings = diagnostics.filter((d) => d.severity === "warning").map((d) => d.message);
  return {
    ok,
    summary: ok ? `${def.driverKey} sandbox ready${warnings.length > 0 ? ` — ${warnings.join("; ")}` : ""}` : `${def.driverKey} sandbox not usable: ${firstError?.message ?? "unknown"}`,
    diagnostics,
  };
}
