import { FlagError, parseFlags, type FlagSpec, type FlagValues } from "./flags.js";
import { randomVmName, TAG_PATTERN, vmNameProblem } from "./names.js";
import type { Ed25519Key } from "./sshsig.js";
import type { Fleet, Vm } from "./vms.js";

/** What one command run produced: exe.dev's exit code and its JSON output lines. */
export interface CommandOutcome {
  exitCode: number;
  output: string;
}

export interface CommandEnvironment {
  fleet: Fleet;
  account: { email: string; keys: () => Ed25519Key[] };
  loginUser: string;
  /** The host VMs' SSH endpoints are dialled at (loopback). */
  sshHost: string;
  /** Suffix of VM host names (`<vm>.exe.xyz`). */
  boxHost: string;
  maxVms: number;
  newDelayMs: number;
  deleteLingerMs: number;
  trailingDigitsAllowed: boolean;
  signal: AbortSignal;
}

/** A command error shown to the client (`cc.Errorf`): exit code 1, `{"error": …}`. */
class CommandError extends Error {}

interface CommandDef {
  flags: FlagSpec;
  description: string;
  usage: string;
  positional?: boolean;
  run(env: CommandEnvironment, flags: FlagValues, args: string[], out: Output): Promise<void>;
}

class Output {
  private lines: string[] = [];
  json(value: unknown): void {
    this.lines.push(JSON.stringify(value));
  }
  error(message: string): void {
    this.json({ error: message });
  }
  text(): string {
    return this.lines.join("\n");
  }
}

/** exe.dev's command names (top-level, and groups whose subcommand is part of the permission name). */
const KNOWN_COMMANDS = [
  "help",
  "doc",
  "ls",
  "new",
  "rm",
  "restart",
  "rename",
  "tag",
  "cp",
  "whoami",
  "delete-ssh-key",
  "browser",
  "ssh",
  "exe0-to-exe1",
  "comment",
  "stat",
  "resize",
  "set-region",
  "true",
  "exit",
];
const COMMAND_GROUPS = ["share", "ssh-key", "team", "integrations", "defaults", "domain", "shelley", "billing"];

/** The permission name of a command line (`ls`, `ssh-key list`), or undefined for an unknown command. */
export function resolveCommandName(words: readonly string[]): string | undefined {
  const [first, second] = words;
  if (first === undefined) return undefined;
  if (COMMAND_GROUPS.includes(first)) return second !== undefined && !second.startsWith("-") ? `${first} ${second}` : first;
  return KNOWN_COMMANDS.includes(first) ? first : undefined;
}

const JSON_ONLY: FlagSpec = { json: "bool" };

const COMMANDS: Record<string, CommandDef> = {
  ls: {
    description: "List your VMs",
    usage: "ls [-l] [name|pattern]",
    flags: { json: "bool", l: "bool" },
    positional: true,
    async run(env, _flags, args, out) {
      let vms = env.fleet.all();
      if (args.length > 0) {
        const picked = new Map<string, Vm>();
        for (const arg of args) {
          const matches = globRegex(arg);
          const name = normalizeName(arg, env.boxHost);
          for (const vm of vms) {
            const hit = matches ? matches.test(vm.name) || vm.tags.some((tag) => matches.test(tag)) : vm.name === name || vm.tags.includes(arg);
            if (hit) picked.set(vm.name, vm);
          }
        }
        vms = [...picked.values()].sort((a, b) => a.name.localeCompare(b.name));
      }
      out.json({ vms: vms.map((vm) => listEntry(env, vm)) });
    },
  },
  new: {
    description: "Create a new VM",
    usage: "new [--name=<name>] [--image=<image>] [flags]",
    flags: {
      name: "string",
      image: "string",
      command: "string",
      prompt: "string",
      json: "bool",
      "no-email": "bool",
      "prompt-model": "string",
      "no-shard": "bool",
      exelet: "string",
      memory: "string",
      disk: "string",
      cpu: "uint",
      env: "repeat",
      tag: "repeat",
      "setup-script": "string",
      comment: "string",
      integration: "repeat",
      "registry-auth": "string",
    },
    async run(env, flags, _args, out) {
      const image = String(flags.image ?? "exeuntu").trim();
      if (image === "" || /\s/.test(image)) throw new CommandError(`invalid image: ${JSON.stringify(image)}`);
      const vars: Record<string, string> = {};
      for (const item of (flags.env as string[] | undefined) ?? []) {
        const eq = item.indexOf("=");
        if (eq < 0) throw new CommandError(`invalid environment variable format ${JSON.stringify(item)}: must be KEY=VALUE`);
        if (eq === 0) throw new CommandError(`invalid environment variable format ${JSON.stringify(item)}: key cannot be empty`);
        vars[item.slice(0, eq)] = item.slice(eq + 1);
      }
      if (flags.prompt) {
        if (image !== "exeuntu") throw new CommandError("--prompt can only be used with the exeuntu image");
        throw new CommandError("the exe.dev emulator has no Shelley: --prompt is not supported");
      }
      if (((flags.integration as string[] | undefined) ?? []).length > 0) throw new CommandError("the exe.dev emulator has no integrations: --integration is not supported");
      if (flags.exelet) throw new CommandError(`${env.account.email} is not in the sudoers file. This incident will be reported.`);
      const memory = sizeFlag("memory", flags.memory, 8 * GIB, GB, 64 * GB);
      const disk = sizeFlag("disk", flags.disk, 20 * GIB, GB, 500 * GB);
      const cpu = (flags.cpu as number | undefined) || 2;
      if (cpu > 16) throw new CommandError("--cpu cannot exceed 16");
      const tags: string[] = [];
      for (const tag of ((flags.tag as string[] | undefined) ?? [])
        .flatMap((value) => value.split(","))
        .map((value) => value.trim())
        .filter(Boolean)) {
        if (!TAG_PATTERN.test(tag)) throw new CommandError(`invalid tag name ${JSON.stringify(tag)}: must match [a-z][a-z0-9_-]*`);
        if (!tags.includes(tag)) tags.push(tag);
      }
      let setupScript = flags["setup-script"] as string | undefined;
      if (setupScript !== undefined) {
        setupScript = setupScript.replace(/\\n/g, "\n");
        if (Buffer.byteLength(setupScript) > 10 * 1024) throw new CommandError("--setup-script must be at most 10 KiB");
      }
      const comment = flags.comment as string | undefined;
      if (comment !== undefined && Buffer.byteLength(comment) > 200) throw new CommandError("--comment must be at most 200 bytes");
      if (env.fleet.all().length >= env.maxVms) throw new CommandError("You have reached the maximum number of VMs allowed on your plan.");
      let name = String(flags.name ?? "");
      if (name === "") {
        for (let i = 0; i < 10 && (name === "" || env.fleet.get(name)); i++) name = randomVmName();
      }
      const problem = vmNameProblem(name, { trailingDigitsAllowed: env.trailingDigitsAllowed });
      if (problem) throw new CommandError(problem);
      // Taken also while another `new` of it is still launching (it is not listed until it runs).
      const release = env.fleet.reserve(name);
      if (!release) throw new CommandError(`VM name ${JSON.stringify(name)} is not available`);
      let vm;
      try {
        if (env.newDelayMs > 0) await abortableSleep(env.newDelayMs, env.signal);
        if (env.signal.aborted) throw new CommandError("cancelled");
        vm = await env.fleet.create({ name, image, cpu, memoryBytes: memory, diskBytes: disk, env: vars, tags, comment, setupScript });
      } finally {
        release();
      }
      const dest = sshDest(env);
      out.json({
        vm_name: vm.name,
        ssh_command: `ssh -p ${vm.host.port} ${dest}`,
        ssh_dest: dest,
        ssh_port: vm.host.port,
        https_url: `https://${vm.name}.${env.boxHost}`,
        proxy_port: 80,
        vscode_url: `vscode://vscode-remote/ssh-remote+${vm.name}.${env.boxHost}/home`,
        xterm_url: `https://${vm.name}.xterm.${env.boxHost}`,
      });
    },
  },
  cp: {
    description: "Copy an existing VM",
    usage: "cp <source-vm> [new-name] [--memory=<size>] [--cpu=<count>] [--disk=<size>]",
    flags: { json: "bool", "copy-tags": "bool", memory: "string", disk: "string", cpu: "uint" },
    positional: true,
    async run(env, flags, args, out) {
      if (args.length < 1 || args.length > 2) throw new CommandError("usage: cp <source-vm> [new-name]");
      if (env.fleet.all().length >= env.maxVms) throw new CommandError("You have reached the maximum number of VMs allowed on your plan.");
      const sourceName = normalizeName(args[0]!, env.boxHost);
      const source = env.fleet.get(sourceName);
      if (source?.status !== "running") throw new CommandError(`vm ${JSON.stringify(sourceName)} not found`);
      // Only the size is the copy's own (0 or absent: the source's).
      const memory = flags.memory ? sizeFlag("memory", flags.memory, 0, GB, 64 * GB) : undefined;
      const disk = flags.disk ? sizeFlag("disk", flags.disk, 0, GB, 500 * GB) : undefined;
      const cpu = (flags.cpu as number | undefined) || undefined;
      if (cpu !== undefined && cpu > 16) throw new CommandError("--cpu cannot exceed 16");
      let name = args[1] ?? "";
      if (name === "") {
        for (let i = 0; i < 10 && (name === "" || env.fleet.get(name)); i++) name = randomVmName();
      }
      const problem = vmNameProblem(name, { trailingDigitsAllowed: env.trailingDigitsAllowed });
      if (problem) throw new CommandError(`invalid name: ${problem}`);
      const release = env.fleet.reserve(name);
      if (!release) throw new CommandError(`name ${JSON.stringify(name)} is not available`);
      const started = Date.now();
      let copy: Vm;
      try {
        copy = await env.fleet.copy(source, { name, cpu, memoryBytes: memory, diskBytes: disk, copyTags: flags["copy-tags"] !== false });
      } finally {
        release();
      }
      // exe.dev's answer: the copy is still booting when cp returns (here it already answers SSH).
      // `ssh` is the destination ls lists as the copy's ssh_dest (exe.dev: BoxDest of the name in
      // both); here the loopback one ls gives, with the copy's own port, as in ls (not at exe.dev).
      out.json({ name, state: "starting", source: sourceName, ssh: sshDest(env), ssh_port: copy.host.port, elapsed: (Date.now() - started) / 1000 });
    },
  },
  tag: {
    description: "Add or remove tags on a VM",
    usage: "tag [-d] <vm> <tag-name> [tag-name...]",
    flags: { json: "bool", d: "bool" },
    positional: true,
    async run(env, flags, args, out) {
      if (args.length < 2) throw new CommandError("usage: tag [-d] <vm> <tag-name> [tag-name...]");
      const name = normalizeName(args[0]!, env.boxHost);
      const names = args.slice(1);
      const seen = new Set<string>();
      for (const tag of names) {
        if (!TAG_PATTERN.test(tag)) throw new CommandError(`invalid tag name ${JSON.stringify(tag)}: must match [a-z][a-z0-9_-]*`);
        if (seen.has(tag)) throw new CommandError(`tag ${JSON.stringify(tag)} specified more than once`);
        seen.add(tag);
      }
      const vm = env.fleet.get(name);
      if (vm?.status !== "running") throw new CommandError(`vm ${JSON.stringify(name)} not found`);
      if (flags.d === true) {
        const missing = names.find((tag) => !vm.tags.includes(tag));
        if (missing) throw new CommandError(`tag ${JSON.stringify(missing)} not found on ${name}`);
        vm.tags = vm.tags.filter((tag) => !names.includes(tag));
      } else {
        const present = names.find((tag) => vm.tags.includes(tag));
        if (present) throw new CommandError(`tag ${JSON.stringify(present)} already exists on ${name}`);
        vm.tags = [...vm.tags, ...names].sort();
      }
      out.json({ vm_name: name, tags: vm.tags });
    },
  },
  rm: {
    description: "Delete a VM",
    usage: "rm <vmname>...",
    flags: JSON_ONLY,
    positional: true,
    async run(env, _flags, args, out) {
      if (args.length < 1) throw new CommandError("please specify at least one VM name to delete");
      const deleted: string[] = [];
      const failed: string[] = [];
      const seen = new Set<string>();
      for (const arg of args) {
        const name = normalizeName(arg, env.boxHost);
        if (seen.has(name)) continue;
        seen.add(name);
        const vm = env.fleet.get(name);
        if (!vm || vm.status !== "running") {
          failed.push(name);
          out.error(`VM ${JSON.stringify(name)} not found`);
          continue;
        }
        try {
          await env.fleet.remove(vm, env.deleteLingerMs);
          deleted.push(name);
        } catch (error) {
          failed.push(name);
          out.error(`failed to delete ${JSON.stringify(name)}: ${(error as Error).message}`);
        }
      }
      out.json({ deleted, failed });
    },
  },
  whoami: {
    description: "Show your user information including email and all SSH keys.",
    usage: "whoami",
    flags: JSON_ONLY,
    async run(env, _flags, _args, out) {
      out.json({ email: env.account.email, ssh_keys: env.account.keys().map((key) => ({ public_key: key.line.split(" ").slice(0, 2).join(" "), fingerprint: key.fingerprint, current: false })) });
    },
  },
};

/** Runs one command line (already split). `--help` on any command answers its help. */
export async function runCommand(env: CommandEnvironment, words: string[]): Promise<CommandOutcome> {
  const out = new Output();
  const [name, ...rest] = words;
  if (name === "help") {
    const topic = rest.find((word) => !word.startsWith("-"));
    const def = topic ? COMMANDS[topic] : undefined;
    if (topic && !def) return { exitCode: 1, output: JSON.stringify({ error: `no help available for unrecognized command: ${topic}` }) };
    out.json(def ? helpOf(topic!, def) : { commands: Object.entries(COMMANDS).map(([command, d]) => ({ name: command, description: d.description })) });
    return { exitCode: 0, output: out.text() };
  }
  const def = name ? COMMANDS[name] : undefined;
  if (!def) return { exitCode: 1, output: JSON.stringify({ error: `the exe.dev emulator does not implement ${JSON.stringify(resolveCommandName(words) ?? name)}` }) };
  if (rest.includes("--help") || rest.includes("-help") || rest.includes("-h")) {
    out.json(helpOf(name!, def));
    return { exitCode: 0, output: out.text() };
  }
  try {
    let parsed: { flags: FlagValues; positional: string[] };
    try {
      parsed = parseFlags(rest, def.flags);
    } catch (error) {
      if (error instanceof FlagError) throw new CommandError(`flag parsing error: ${error.message}`);
      throw error;
    }
    if (parsed.positional.length > 0 && !def.positional) throw new CommandError(`${JSON.stringify(name)} command has no subcommands and does not take positional arguments`);
    await def.run(env, parsed.flags, parsed.positional, out);
    return { exitCode: 0, output: out.text() };
  } catch (error) {
    if (error instanceof CommandError) {
      out.error(error.message);
      return { exitCode: 1, output: out.text() };
    }
    // exe.dev hides the cause behind a trace id; the emulator reports it on stderr.
    process.stderr.write(`exe-dev emulator: ${words[0]} failed: ${(error as Error).stack ?? String(error)}\n`);
    out.error(`${JSON.stringify(words.join(" "))}: internal error, trace ID: emulator`);
    return { exitCode: 1, output: out.text() };
  }
}

/** Whether the emulator runs this command (others answer 501 after the permission check). */
export function isImplemented(words: readonly string[]): boolean {
  return words[0] === "help" || (words[0] !== undefined && words[0] in COMMANDS);
}

/** Every exe.dev command and command group the emulator knows of (what its coverage table lists). */
export function exeDevCommandNames(): string[] {
  return [...KNOWN_COMMANDS, ...COMMAND_GROUPS];
}

function helpOf(name: string, def: CommandDef) {
  return { name, description: def.description, usage: def.usage, flags: Object.keys(def.flags).map((flag) => `--${flag}`) };
}

// Every emulated VM answers on 127.0.0.1 (a port of its own): the destination names no VM.
function sshDest(env: CommandEnvironment): string {
  return `${env.loginUser}@${env.sshHost}`;
}

function listEntry(env: CommandEnvironment, vm: Vm) {
  return {
    vm_name: vm.name,
    ssh_dest: sshDest(env),
    ssh_host: env.sshHost,
    ssh_user: env.loginUser,
    // Not in exe.dev's listing (its VMs all answer on port 22): every emulated VM has a port of its own.
    ssh_port: vm.host.port,
    status: vm.status === "running" ? "running" : "stopping",
    region: "emu",
    region_display: "Emulator (loopback)",
    https_url: `https://${vm.name}.${env.boxHost}`,
    ...(vm.image !== "exeuntu" ? { image: vm.image } : {}),
    ...(vm.tags.length > 0 ? { tags: vm.tags } : {}),
  };
}

function normalizeName(arg: string, boxHost: string): string {
  const suffix = `.${boxHost}`;
  return arg.endsWith(suffix) ? arg.slice(0, -suffix.length) : arg;
}

/** A shell glob as a whole-string regex, or undefined when the word has no glob characters. */
function globRegex(word: string): RegExp | undefined {
  if (!/[*?[]/.test(word)) return undefined;
  let source = "";
  for (let i = 0; i < word.length; i++) {
    const c = word[i]!;
    if (c === "*") source += ".*";
    else if (c === "?") source += ".";
    else if (c === "[") {
      const end = word.indexOf("]", i + 1);
      if (end < 0) throw new CommandError(`invalid pattern ${JSON.stringify(word)}: unterminated [`);
      source += `[${word
        .slice(i + 1, end)
        .replace(/^!/, "^")
        .replace(/\\/g, "\\\\")}]`;
      i = end;
    } else source += c.replace(/[.+^${}()|\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`);
}

const GB = 1e9;
const GIB = 1024 ** 3;

/** exe.dev's sizes: a bare number is GiB, otherwise humanize.ParseBytes (GB = 10^9, GiB = 2^30). */
function sizeFlag(name: string, raw: unknown, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw === "") return fallback;
  const text = String(raw).trim();
  let bytes: number;
  if (/^\d+$/.test(text)) bytes = Number(text) * GIB;
  else {
    const match = /^(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)$/i.exec(text);
    if (!match) throw new CommandError(`invalid --${name} value: strconv.ParseFloat: parsing ${JSON.stringify(text)}: invalid syntax`);
    const unit = match[2]!.toLowerCase();
    const power = "bkmgt".indexOf(unit[0]!);
    bytes = Number(match[1]) * (unit.includes("i") ? 1024 : 1000) ** power;
  }
  if (bytes < min) throw new CommandError(`--${name} must be at least ${formatBytes(min)}`);
  if (bytes > max) throw new CommandError(`--${name} cannot exceed ${formatBytes(max)}`);
  return bytes;
}

function formatBytes(bytes: number): string {
  return `${(bytes / GB).toFixed(1)} GB`;
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
