import { z } from "zod";
import { defineProviderConfig, fields } from "@paperclip-sandbox/kit";

const faultMessage = () => z.string().min(1).optional();

export const fakeConfigSchema = z.object({
  image: z.string().min(1).default("fake:latest").describe("Recorded only; the fake provider runs no image."),
  timeoutMs: fields.timeoutMs({ default: 300_000 }).describe("Default timeout for one execute, in milliseconds."),
  reuseLease: z.boolean().default(false).describe("Keep the lease directory across runs so the host can resume it."),
  acquireDelayMs: fields.positiveInt({ min: 0, max: 600_000 }).optional().describe("Fault injection: delay every acquire."),
  probeFailure: faultMessage().describe("Fault injection: probe fails with this message."),
  acquireFailure: faultMessage().describe("Fault injection: acquire fails with this message."),
  acquireFailureAfterCreate: faultMessage().describe("Fault injection: acquire fails with this message after the lease directory exists (it must be removed)."),
  executeFailure: faultMessage().describe("Fault injection: execute fails with this message."),
});

export type FakeConfig = z.output<typeof fakeConfigSchema>;

const FAULT_FIELDS = ["acquireDelayMs", "probeFailure", "acquireFailure", "acquireFailureAfterCreate", "executeFailure"] as const;

export const fakeConfig = defineProviderConfig(fakeConfigSchema, {
  warnings: (config) => {
    const enabled = FAULT_FIELDS.filter((field) => config[field] !== undefined);
    return enabled.length > 0 ? [`fault injection is enabled: ${enabled.join(", ")}`] : [];
  },
});
