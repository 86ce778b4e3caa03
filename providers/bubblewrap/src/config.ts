import { isIP } from "node:net";
import { z } from "zod";
import { defineProviderConfig, fields } from "@paperclip-sandbox/kit";
import { diskLimitProblem } from "@paperclip-sandbox/sandbox-backend";
import { isTemplateRef } from "./templates.js";

const DEFAULT_TIMEOUT_MS = 300_000;
/** A lease always has an expiry the supervisor enforces, so nothing of it can run forever. */
export const DEFAULT_LEASE_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_LEASE_TTL_MS = 30 * 24 * 60 * 60 * 1000;

const FQDN_PATTERN = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.?$/i;

function fqdnProblem(value: string): string | undefined {
  return FQDN_PATTERN.test(value) ? undefined : "must be a host name (api.example.com) or *.domain";
}

function cidrProblem(value: string): string | undefined {
  const [address = "", prefix, ...rest] = value.split("/");
  const family = isIP(address);
  if (rest.length > 0 || family === 0) return "must be an IPv4/IPv6 address or CIDR (e.g. 10.0.0.0/8)";
  if (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))) {
    return `prefix must be 0-${family === 4 ? 32 : 128}`;
  }
  return undefined;
}

const RESOURCES = "Resources";
const NETWORK = "Network";
const TUNING = "Tuning";
const PATHS = "Paths";
const CGROUP_NOTE = "Enforced with cgroups when the worker may create them; Test says when it cannot.";

export const configSchema = z.object({
  cpu: fields
    .ui(z.number().positive().max(1024), {
      title: "CPU limit",
      unit: "cores",
      description: `CPU time the sandbox may use, in cores (0.5 is half a core). ${CGROUP_NOTE}`,
      group: RESOURCES,
      examples: [0.5, 1, 2, 4],
    })
    .optional(),
  memoryMb: fields
    .positiveInt({
      min: 16,
      max: 1_048_576,
      title: "Memory limit",
      unit: "MiB",
      description: `Memory of all the sandbox's processes together, swap included. ${CGROUP_NOTE}`,
      group: RESOURCES,
      examples: [512, 1024, 2048, 4096],
    })
    .optional(),
  pids: fields
    .positiveInt({
      min: 8,
      max: 4_194_304,
      title: "Max processes",
      description: `Most processes and threads the sandbox may have at once. ${CGROUP_NOTE}`,
      group: RESOURCES,
      examples: [256, 1024, 4096],
    })
    .optional(),
  diskMb: fields
    .positiveInt({
      min: 16,
      max: 16_777_216,
      title: "Disk limit",
      unit: "MiB",
      description:
        "What the sandbox may write to its workspace, home and /tmp together: a filesystem of that size of its own (a sparse file on the host). Needs a worker running as root with e2fsprogs and loop devices; Test says when it cannot be enforced, and why.",
      group: RESOURCES,
      examples: [1024, 10240],
    })
    .optional(),
  egressAllowFqdns: fields.stringList({
    item: fqdnProblem,
    itemExamples: ["api.github.com", "*.npmjs.org"],
    title: "Allowed host names",
    description:
      "Host names the sandbox may reach through the egress proxy, one per item, e.g. api.github.com, or *.npmjs.org for every subdomain. With no host names and no IP ranges the sandbox has no outbound network.",
    group: NETWORK,
  }),
  egressAllowCidrs: fields.stringList({
    item: cidrProblem,
    itemExamples: ["10.0.0.0/8", "192.0.2.10"],
    title: "Allowed IP ranges",
    description: "IP addresses or CIDR ranges the sandbox may reach through the egress proxy, one per item, e.g. 10.0.0.0/8 or 192.0.2.10.",
    group: NETWORK,
  }),
  reuseLease: fields.reuseLease(),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  timeoutMs: fields.timeoutMs({
    default: DEFAULT_TIMEOUT_MS,
    title: "Command timeout",
    description: "Time limit of one command when Paperclip sets none.",
    group: TUNING,
    advanced: true,
    examples: [60_000, 300_000, 1_800_000],
  }),
  leaseTtlMs: fields
    .positiveInt({
      min: 1_000,
      max: MAX_LEASE_TTL_MS,
      title: "Lease lifetime",
      unit: "ms",
      description: "A lease ends this long after it starts, whatever it is doing. Empty: 24 hours (86400000).",
      group: TUNING,
      advanced: true,
      examples: [3_600_000, 86_400_000],
    })
    .optional(),
  rootfs: fields
    .absolutePosixPath({
      title: "Root filesystem",
      description: "Host directory used as the sandbox's root tree instead of the host's /usr, /bin, /lib and /etc; it needs sh, node and tar. Empty: the host's own tree.",
      group: PATHS,
      advanced: true,
      examples: ["/srv/rootfs/debian-12"],
    })
    .optional(),
  stateDir: fields
    .absolutePosixPath({
      title: "State directory",
      description: "Host directory where lease directories live; it must belong to the worker's user. Empty: $XDG_STATE_HOME/paperclip-bubblewrap, or /var/tmp/paperclip-bubblewrap-<uid>.",
      group: PATHS,
      advanced: true,
      examples: ["/var/lib/paperclip-bubblewrap"],
    })
    .optional(),
  templateRef: fields
    .ui(z.string().max(64).refine(isTemplateRef, { message: "must be a template Paperclip captured (tpl- and 24 hex digits)" }), {
      title: "Custom image template",
      description: "The captured template new sandboxes start from (a copy of a setup sandbox's workspace, home and /tmp). Paperclip sets it when you capture a custom image; empty: a clean sandbox.",
      group: PATHS,
      advanced: true,
    })
    .optional(),
});

export type BubblewrapConfig = z.output<typeof configSchema>;

export const providerConfig = defineProviderConfig(configSchema, {
  warnings: (config) => {
    // Said only where it really cannot be enforced (an unprivileged worker, no e2fsprogs or loop devices).
    const problem = config.diskMb !== undefined ? diskLimitProblem() : null;
    return problem ? [`Disk limit (MiB) cannot be enforced on this worker: ${problem}`] : [];
  },
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
    templateRef: config.templateRef ?? null,
  };
}
