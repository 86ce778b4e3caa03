export const LABEL_VALUE_MAX = 63;

export interface LeaseLabels {
  "paperclip-provider": string;
  "paperclip-company"?: string;
  "paperclip-environment": string;
  "paperclip-run": string;
}

/** Labels that let a provider (or an operator) find a run's resources; values fit label rules everywhere. */
export function leaseLabels(input: { driverKey: string; companyId?: string; environmentId: string; runId: string }): LeaseLabels {
  return {
    "paperclip-provider": labelValue(input.driverKey),
    ...(input.companyId === undefined ? {} : { "paperclip-company": labelValue(input.companyId) }),
    "paperclip-environment": labelValue(input.environmentId),
    "paperclip-run": labelValue(input.runId),
  };
}

/** Lowercase, `[a-z0-9-_.]` only, at most 63 characters, starting and ending alphanumeric. */
export function labelValue(raw: string): string {
  return raw
    .toLowerCase()
    .replace(/[^a-z0-9\-_.]/g, "-")
    .slice(0, LABEL_VALUE_MAX)
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "");
}
