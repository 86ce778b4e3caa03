// The Coder emulator with the runner app's template, as the provider's tests use it.
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, type CoderEmulatorOptions, type DeploymentControl, type TemplateSpec } from "@paperclip-sandbox/emulator-coder";
import { runnerEmulatorTemplate } from "../runner-install.js";

export interface CoderWorld {
  emu: RunningEmulator;
  control: DeploymentControl;
  token: string;
  /** A valid provider config against this emulator. */
  config: Record<string, unknown>;
}

export async function startCoderEmulator(options: Partial<CoderEmulatorOptions> & { extraTemplates?: TemplateSpec[] } = {}): Promise<CoderWorld> {
  let control: DeploymentControl | undefined;
  const { extraTemplates = [], ...rest } = options;
  const emu = await runEmulator(emulator, {
    options: {
      templates: [runnerEmulatorTemplate() as TemplateSpec, ...extraTemplates],
      ...rest,
      expose: (c) => (control = c),
    },
  });
  const token = emu.credentials.sessionToken!;
  return { emu, control: control!, token, config: { coderUrl: emu.url, apiToken: token, template: "paperclip", timeoutMs: 60_000 } };
}
