import { z } from "zod";
import { checkPrivateKey, defineProviderConfig, fields, looksLikeKeyMaterial, resolveSecretRef } from "@paperclip-sandbox/kit";
import { isVmName, VM_NAME_RULE_TEXT } from "./vm-names.js";

const API_KEY_ENV = "EXE_API_KEY";
const DEFAULT_API_URL = "https://exe.dev/exec";
/** The lifecycle commands the API token must list (exe.dev answers 403 for one it does not). */
export const REQUIRED_TOKEN_CMDS = ["new", "ls", "rm"] as const;
/** What custom images need besides: `cp` (capture, and runs from a template) and `tag` (a copy's labels). */
export const TEMPLATE_TOKEN_CMDS = ["cp", "tag"] as const;

const CONNECTION = "Connection";
const SSH = "SSH";
const VM = "VM";
const TUNING = "Tuning";

/** exe.dev's tag rule. */
const TAG_RULE = /^[a-z][a-z0-9_-]*$/;
/** exe.dev's VM name grammar; a prefix must fit it and leave room for the generated part. */
const PREFIX_RULE = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
const SIZE_RULE = /^\d+(\.\d+)?\s*([KMGT]i?B?)?$/i;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const USER_RULE = /^[a-z_][a-z0-9_.+-]{0,63}$/i;

const size = (ui: { title: string; description: string }) =>
  fields.ui(z.string().trim().regex(SIZE_RULE, { error: "must be a size such as 4, 4GB or 8GiB (a bare number is GiB)" }), { ...ui, group: VM, advanced: true }).optional();

export const exeDevConfigSchema = z.object({
  apiKey: fields.secretRef({
    envFallback: API_KEY_ENV,
    title: "API token",
    description: "An exe.dev API token (exe0.… or exe1.…) whose commands include new, ls and rm (and cp and tag for custom images).",
    group: CONNECTION,
  }),
  apiUrl: fields
    .url({ title: "API URL", description: `exe.dev's HTTPS API. Empty: ${DEFAULT_API_URL}. A URL without /exec gets it appended.`, group: CONNECTION, advanced: true })
    .default(DEFAULT_API_URL),
  sshPrivateKey: fields
    .secretRef({
      title: "SSH private key",
      description: "A private key registered with the exe.dev account (the whole file, unencrypted). It reaches ssh as a 0600 file that is removed with the lease. Set this or SSH identity file.",
      group: SSH,
    })
    .optional(),
  sshIdentityFile: fields
    .absolutePosixPath({ title: "SSH identity file", description: "Path of a private key file on the Paperclip host, readable by its worker. Instead of SSH private key.", group: SSH, advanced: true })
    .optional(),
  sshUser: fields
    .ui(z.string().regex(USER_RULE, { error: "must be a user name" }), {
      title: "SSH user",
      description: "Log in as this user. Empty: the user exe.dev names for the VM, else ssh's default.",
      group: SSH,
      advanced: true,
    })
    .optional(),
  sshPort: fields.positiveInt({ title: "SSH port", max: 65_535, default: 22, description: "Used when exe.dev does not name the VM's port. Empty: 22.", group: SSH, advanced: true }),
  sshKnownHosts: fields
    .ui(z.string().trim().min(1), {
      title: "Pinned host keys",
      description:
        "known_hosts lines (host patterns and keys, @cert-authority allowed). Set: only these keys are accepted. Empty: a VM's key is recorded when the lease first connects and any other key is refused afterwards.",
      group: SSH,
      advanced: true,
    })
    .optional(),
  image: fields
    .ui(z.string().trim().regex(/^\S+$/, { error: "must not contain spaces" }), {
      title: "Image",
      description: "Container image the VM starts from (exeuntu, ubuntu:24.04, …). Empty: exe.dev's default (exeuntu).",
      group: VM,
    })
    .optional(),
  templateRef: fields
    .templateRef({
      // Read as before: any owned name (the previous release's form too) that exe.dev can hold as a VM.
      legacy: true,
      vendorRule: (value) => (isVmName(value) ? undefined : VM_NAME_RULE_TEXT),
      title: "Custom image template",
      description:
        "The template VM Paperclip captured as this environment's custom image (an exe.dev copy of the setup VM); VMs start as copies of it (cp: its disk, with CPU, Memory and Disk applied) instead of from Image. Paperclip sets it when you capture a custom image; empty: Image.",
      group: VM,
      advanced: true,
    })
    .optional(),
  cpu: fields.positiveInt({ title: "CPU", unit: "cores", max: 64, description: "Cores per VM. Empty: exe.dev's default.", group: VM, advanced: true, examples: [2, 4] }).optional(),
  memory: size({ title: "Memory", description: "Memory per VM, e.g. 4GB. Empty: exe.dev's default." }),
  disk: size({ title: "Disk", description: "Disk per VM, e.g. 20GB. Empty: exe.dev's default." }),
  setupScript: fields
    .ui(z.string().max(10_240, { error: "must be at most 10 KiB (exe.dev's limit)" }), {
      title: "Setup script",
      description: "Shell script exe.dev runs once when the VM first boots (as the VM's user). Empty: none.",
      group: VM,
      advanced: true,
    })
    .optional(),
  env: fields.stringList({
    title: "Environment",
    description: "KEY=VALUE items set in the VM's environment when it is created.",
    group: VM,
    advanced: true,
    itemExamples: ["NODE_ENV=production"],
    item: (value) => {
      const eq = value.indexOf("=");
      if (eq <= 0) return "must be KEY=VALUE";
      return ENV_NAME.test(value.slice(0, eq)) ? undefined : "must start with a variable name (letters, digits, _; not a digit first)";
    },
  }),
  tags: fields.stringList({
    title: "Tags",
    description: "exe.dev tags added to every VM (lower-case letters, digits, _ and -, starting with a letter). The provider adds its own paperclip-… tags.",
    group: VM,
    advanced: true,
    itemExamples: ["ci"],
    item: (value) => (TAG_RULE.test(value) ? undefined : "must start with a lower-case letter and hold only a-z, 0-9, _ and -"),
  }),
  namePrefix: fields
    .ui(
      z
        .string()
        .trim()
        .max(24, { error: "must be at most 24 characters" })
        .regex(PREFIX_RULE, { error: "must start with a lower-case letter and hold lower-case letters and digits, with single hyphens between them" }),
      {
        title: "VM name prefix",
        description: "VM names are <prefix>-<environment>-<random>, ending in a letter (exe.dev refuses names ending in -<digits>). Empty: paperclip.",
        group: VM,
        advanced: true,
      },
    )
    .default("paperclip"),
  reuseLease: fields.reuseLease(),
  runnerLifecycleMode: fields.runnerLifecycleMode(),
  timeoutMs: fields.timeoutMs({ default: 300_000, title: "Command timeout", description: "Time limit of one command when Paperclip sets none.", group: TUNING, advanced: true }),
});

export type ExeDevConfig = z.output<typeof exeDevConfigSchema>;

/** Any base URL works: `https://exe.dev` and `https://exe.dev/` become `https://exe.dev/exec`. */
export function normalizeApiUrl(value: string): string {
  const url = new URL(value);
  url.search = "";
  url.hash = "";
  const path = url.pathname.replace(/\/+$/, "");
  url.pathname = path.endsWith("/exec") ? path : `${path}/exec`;
  return url.toString();
}

/** The API token: the config's, else the worker's EXE_API_KEY. */
export function apiKeyOf(config: ExeDevConfig, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return resolveSecretRef(config.apiKey, API_KEY_ENV, env);
}

export const exeDevConfig = defineProviderConfig(exeDevConfigSchema);

/** How ssh gets its key: the pasted key (checked, repaired) or a file on the host. */
export type SshIdentity = { privateKey: string; repaired: string[] } | { file: string };

export const KEY_REQUIRED = "SSH private key or SSH identity file: one is required (exe.dev VMs accept only keys registered with the account)";
export const KEY_AND_FILE = "SSH private key and SSH identity file are both set: set one";

/** The key ssh will use, or the problem with it (named by field title and rule). */
export function sshIdentityOf(config: ExeDevConfig): { ok: true; identity: SshIdentity } | { ok: false; problem: string } {
  if (config.sshPrivateKey !== undefined && config.sshIdentityFile !== undefined) return { ok: false, problem: KEY_AND_FILE };
  if (config.sshIdentityFile !== undefined) return { ok: true, identity: { file: config.sshIdentityFile } };
  if (config.sshPrivateKey === undefined) return { ok: false, problem: KEY_REQUIRED };
  const checked = checkPrivateKey(config.sshPrivateKey);
  if (!checked.ok) return { ok: false, problem: `SSH private key: ${checked.problem}` };
  return { ok: true, identity: { privateKey: checked.key, repaired: checked.repaired } };
}

/** Validation beyond the schema: the key's paste mistakes (errors, or warnings for the repaired ones). */
export function configProblems(config: ExeDevConfig, env: NodeJS.ProcessEnv = process.env): { errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  if (!apiKeyOf(config, env)) warnings.push(`no API token: set API token, or ${API_KEY_ENV} in the plugin worker's environment`);
  if (config.sshPrivateKey !== undefined && config.sshIdentityFile !== undefined) errors.push(KEY_AND_FILE);
  else if (config.sshPrivateKey === undefined && config.sshIdentityFile === undefined) errors.push(KEY_REQUIRED);
  else if (config.sshPrivateKey !== undefined && looksLikeKeyMaterial(config.sshPrivateKey)) {
    // A value that is not key material is an unresolved secret reference: checked when the lease is made.
    const checked = checkPrivateKey(config.sshPrivateKey);
    if (!checked.ok) errors.push(`SSH private key: ${checked.problem}`);
    else for (const repair of checked.repaired) warnings.push(`SSH private key: ${repair}`);
  }
  // A VM copied from a template has the template's disk: nothing makes it from an image or runs a first-boot script.
  if (config.templateRef !== undefined) {
    if (config.image !== undefined) errors.push(`${IMAGE}: not with ${TEMPLATE} (a copy of the template has its disk and image); clear one`);
    if (config.setupScript !== undefined) errors.push(`${SETUP_SCRIPT}: not with ${TEMPLATE} (a copy of the template does not boot afresh, so it would never run); clear one`);
    if (config.env.length > 0) warnings.push(`${ENVIRONMENT}: not applied to VMs copied from ${TEMPLATE} (exe.dev's cp takes no environment): they keep the one the template's setup VM was made with`);
  }
  return { errors, warnings };
}

const TEMPLATE = "Custom image template";
const IMAGE = "Image";
const SETUP_SCRIPT = "Setup script";
const ENVIRONMENT = "Environment";

/** The env list as a map (items are already checked). */
export function envOf(config: ExeDevConfig): Record<string, string> {
  return Object.fromEntries(config.env.map((item) => [item.slice(0, item.indexOf("=")), item.slice(item.indexOf("=") + 1)]));
}
