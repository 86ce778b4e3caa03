import { isIP } from "node:net";
import { z } from "zod";
import { defineProviderConfig, fields } from "@paperclip-sandbox/kit";

export const DEFAULT_TIMEOUT_MS = 300_000;
/** A lease always has an expiry the supervisor enforces, so nothing of it can run forever. */
export const DEFAULT_LEASE_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_LEASE_TTL_MS = 30 * 24 * 60 * 60 * 1000;

const FQDN_PATTERN = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.?$/i;

function cidrProblem(value: string): string | undefined {
  const [address = "", prefix, ...rest] = value.trim().split("/");
  const family = isIP(address);
  if (rest.length > 0 || family === 0) return "must be an IPv4/IPv6 address or CIDR (e.g. 10.0.0.0/8)";
  if (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))) {
    return `prefix must be 0-${family === 4 ? 32 : 128}`;
  }
  return undefined;
}

export const configSchema = z.object({
  rootfs: fields
    .absolutePosixPath()
    .optional()
    .describe("Host directory used as the sandbox's root tree instead of the host's /usr, /bin, /lib and /etc"),
  timeoutMs: fields.timeoutMs({ default: DEFAULT_TIMEOUT_MS }).describe("Default command timeout (ms)"),
  reuseLease: z.boolean().default(false).describe("Keep a stopped lease's disk and resume it for the next run"),
  cpu: z.number().positive().max(1024).optional().describe("CPU limit in cores (e.g. 0.5), enforced with cgroups"),
  memoryMb: fields.positiveInt({ min: 16, max: 1_048_576 }).optional().describe("Memory limit in MiB, enforced with cgroups"),
  pids: fields.positiveInt({ min: 8, max: 4_194_304 }).optional().describe("Maximum number of processes, enforced with cgroups"),
  diskMb: fields.positiveInt().optional().describe("Disk limit in MiB (not enforced: reported as a warning)"),
  egressAllowFqdns: z
    .array(z.string().regex(FQDN_PATTERN, { error: "must be a host name or *.domain" }))
    .default([])
    .describe("Host names (or *.domain) the sandbox may reach through the egress proxy"),
  egressAllowCidrs: z
    .array(
      z.string().superRefine((value, ctx) => {
        const problem = cidrProblem(value);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      }),
    )
    .default([])
    .describe("IP ranges the sandbox may reach through the egress proxy"),
  leaseTtlMs: fields.positiveInt({ min: 1_000, max: MAX_LEASE_TTL_MS }).optional().describe("Lease lifetime (ms); default 24 h"),
  stateDir: fields
    .absolutePosixPath()
    .optional()
    .describe("Where lease directories live (default $XDG_STATE_HOME/paperclip-bubblewrap or /var/tmp/paperclip-bubblewrap-<uid>)"),
});

export type BubblewrapConfig = z.output<typeof configSchema>;

export const providerConfig = defineProviderConfig(configSchema, {
  warnings: (config) =>
    config.diskMb !== undefined
      ? ["diskMb is not enforced by the bubblewrap provider (lease directories have no filesystem quota)"]
      : [],
});

/** Config fields that shape the sandbox: a change means a different sandbox (reuse fingerprint). */
export function sandboxShape(config: BubblewrapConfig): Record<string, unknown> {
  return {
    rootfs: config.rootfs ?? null,
    cpu: config.cpu ?? null,
    memoryMb: config.memoryMb ?? null,
    pids: config.pids ?? null,
    diskMb: config.diskMb ?? null,
    egressAllowFqdns: [...config.egressAllowFqdns].sort(),
    egressAllowCidrs: [...config.egressAllowCidrs].sort(),
    stateDir: config.stateDir ?? null,
  };
}
