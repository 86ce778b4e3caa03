import { z } from "zod";
import { defineProviderConfig, FIELD_MAX_LENGTH, fields, type FieldUi } from "@paperclip-sandbox/kit";

const FAULTS = "Fault injection";

const faultMessage = (ui: FieldUi) => fields.ui(z.string().min(1), { group: FAULTS, advanced: true, ...ui }).optional();

export const fakeConfigSchema = z.object({
  image: fields
    .ui(z.string().min(1).max(FIELD_MAX_LENGTH.image), {
      title: "Image (recorded only)",
      description: "Recorded in the lease and its reuse fingerprint; the fake provider runs no image. Empty: fake:latest.",
      group: "Sandbox",
    })
    .default("fake:latest"),
  reuseLease: fields.reuseLease(),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  timeoutMs: fields.timeoutMs({
    default: 300_000,
    title: "Command timeout",
    description: "Time limit of one command when Paperclip sets none.",
    group: "Tuning",
    advanced: true,
  }),
  acquireDelayMs: fields.positiveInt({ min: 0, max: 600_000, title: "Acquire delay", unit: "ms", description: "Wait this long in every acquire.", group: FAULTS, advanced: true }).optional(),
  probeFailure: faultMessage({ title: "Probe failure", description: "When set, Test fails with this message." }),
  acquireFailure: faultMessage({ title: "Acquire failure", description: "When set, every acquire fails with this message." }),
  acquireFailureAfterCreate: faultMessage({
    title: "Acquire failure after create",
    description: "When set, every acquire fails with this message after its lease directory exists (which must then be removed).",
  }),
  executeFailure: faultMessage({ title: "Execute failure", description: "When set, every command fails with this message." }),
});

export type FakeConfig = z.output<typeof fakeConfigSchema>;

const FAULT_FIELDS = ["acquireDelayMs", "probeFailure", "acquireFailure", "acquireFailureAfterCreate", "executeFailure"] as const;

export const fakeConfig = defineProviderConfig(fakeConfigSchema, {
  warnings: (config) => {
    const enabled = FAULT_FIELDS.filter((field) => config[field] !== undefined);
    return enabled.length > 0 ? [`fault injection is enabled: ${enabled.join(", ")}`] : [];
  },
});
