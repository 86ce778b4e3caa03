import { createVendorClient, isPollTimeoutError, isProviderApiError, pollUntil, shellQuote, type PollOptions, type VendorClient } from "@paperclip-sandbox/kit";
import { REQUIRED_TOKEN_CMDS, TEMPLATE_TOKEN_CMDS } from "./config.js";

/** A VM as exe.dev reports it (`new --json`, `ls --json`). */
export interface VmRecord {
  name: string;
  /** The ready-to-use ssh destination, possibly `user@host`. */
  sshDest: string;
  /** The host to dial and the user routing needs (absent: any user works), when exe.dev says. */
  sshHost?: string;
  sshUser?: string;
  sshPort?: number;
  httpsUrl?: string;
  status?: string;
  tags: string[];
}

export interface NewVmRequest {
  name: string;
  tags: string[];
  image?: string;
  cpu?: number;
  memory?: string;
  disk?: string;
  env: Record<string, string>;
  setupScript?: string;
}

/** `cp`: a new VM whose disk is a copy of the source's; only the size may differ (exe.dev honours nothing else). */
export interface CopyVmRequest {
  source: string;
  name: string;
  cpu?: number;
  memory?: string;
  disk?: string;
}

/** The clock a wait runs on (injected in tests). */
export type PollClock = Pick<PollOptions<unknown>, "now" | "sleep">;

export interface ExeDevApi {
  readonly client: VendorClient;
  newVm(request: NewVmRequest, signal?: AbortSignal): Promise<VmRecord>;
  /**
   * `cp --copy-tags=false`: the copy carries no tags of the source (its own are added with `tag`).
   * The copy as the answer names it; undefined when the answer names no SSH destination.
   */
  copyVm(request: CopyVmRequest, signal?: AbortSignal): Promise<VmRecord | undefined>;
  /** `tag <vm> <tag>…`: adds tags (exe.dev refuses one already there). */
  tagVm(name: string, tags: readonly string[], signal?: AbortSignal): Promise<void>;
  /** VMs whose name or a tag equals `filter` (exe.dev's `ls <name|tag>`), or all. */
  list(filter?: string, signal?: AbortSignal): Promise<VmRecord[]>;
  /** The VM of that name, or undefined. */
  find(name: string, signal?: AbortSignal): Promise<VmRecord | undefined>;
  /** Deletes a VM; one exe.dev does not know counts as deleted. */
  remove(name: string, signal?: AbortSignal): Promise<void>;
}

/** exe.dev's own limit is 30 s per command; the client gives up a little earlier. */
const CALL_TIMEOUT_MS = 29_000;

export function createExeDevApi(opts: { apiUrl: string; apiKey: string; onRetry?: (message: string) => void; fetch?: typeof fetch }): ExeDevApi {
  const url = new URL(opts.apiUrl);
  const segments = url.pathname.split("/");
  const last = segments.pop() || "exec";
  url.pathname = `${segments.join("/")}/`;
  const client = createVendorClient({
    vendor: "exe.dev",
    baseUrl: url,
    headers: { authorization: `Bearer ${opts.apiKey}` },
    timeoutMs: CALL_TIMEOUT_MS,
    retry: { attempts: 4, totalMs: 60_000 },
    fetch: opts.fetch,
    extractError: ({ status, text }) => {
      // exe.dev rate-limits a token before it reads the command: a 429 never ran anything.
      const notProcessed = status === 429 ? { notProcessed: true } : {};
      try {
        const lines = text.trim().split("\n");
        const error = (JSON.parse(lines[lines.length - 1]!) as { error?: unknown }).error;
        return typeof error === "string" ? { message: error, ...notProcessed } : notProcessed;
      } catch {
        return notProcessed;
      }
    },
    onRetry: opts.onRetry && ((event) => opts.onRetry!(`exe.dev ${event.operation}: retrying in ${event.delayMs} ms after: ${event.error.message}`)),
  });

  /** POSTs one command line; the answer's last JSON line (exe.dev may print an error line before it). */
  const run = async (command: string, words: { operation: string; idempotent: boolean; signal?: AbortSignal }): Promise<unknown> => {
    try {
      const response = await client.request({
        operation: words.operation,
        method: "POST",
        path: last,
        headers: { "content-type": "text/plain; charset=utf-8", accept: "application/json" },
        body: command,
        idempotent: words.idempotent,
        signal: words.signal,
      });
      const lines = response.text().trim().split("\n").filter(Boolean);
      return lines.length === 0 ? undefined : JSON.parse(lines[lines.length - 1]!);
    } catch (error) {
      throw explain(error, words.operation);
    }
  };

  const api: ExeDevApi = {
    client,
    async newVm(request, signal) {
      const parts = ["new", "--json", "--no-email", flag("name", request.name)];
      if (request.image) parts.push(flag("image", request.image));
      if (request.cpu !== undefined) parts.push(flag("cpu", String(request.cpu)));
      if (request.memory) parts.push(flag("memory", request.memory));
      if (request.disk) parts.push(flag("disk", request.disk));
      for (const tag of request.tags) parts.push(flag("tag", tag));
      for (const [key, value] of Object.entries(request.env)) parts.push(flag("env", `${key}=${value}`));
      if (request.setupScript) parts.push(flag("setup-script", request.setupScript));
      const answer = await run(parts.join(" "), { operation: "new", idempotent: false, signal });
      const record = vmRecordOf(answer);
      if (!record) throw new Error(`exe.dev did not return the VM it made for ${request.name}`);
      return { ...record, tags: record.tags.length > 0 ? record.tags : request.tags };
    },
    async copyVm(request, signal) {
      const parts = ["cp", "--json", "--copy-tags=false", shellQuote(request.source), shellQuote(request.name)];
      if (request.cpu !== undefined) parts.push(flag("cpu", String(request.cpu)));
      if (request.memory) parts.push(flag("memory", request.memory));
      if (request.disk) parts.push(flag("disk", request.disk));
      return copyRecordOf(await run(parts.join(" "), { operation: "cp", idempotent: false, signal }), request.name);
    },
    async tagVm(name, tags, signal) {
      await run(["tag", "--json", shellQuote(name), ...tags.map(shellQuote)].join(" "), { operation: "tag", idempotent: false, signal });
    },
    async list(filter, signal) {
      const answer = await run(filter === undefined ? "ls --json" : `ls --json ${shellQuote(filter)}`, { operation: "ls", idempotent: true, signal });
      const vms = (answer as { vms?: unknown[] } | undefined)?.vms;
      if (!Array.isArray(vms)) throw new Error("exe.dev's ls answered without a vms list");
      return vms.map(vmRecordOf).filter((vm): vm is VmRecord => vm !== undefined);
    },
    async find(name, signal) {
      return (await api.list(name, signal)).find((vm) => vm.name === name);
    },
    async remove(name, signal) {
      // An unknown VM is reported in `failed` with a 200: already gone, which is what rm is for.
      await run(`rm --json ${shellQuote(name)}`, { operation: "rm", idempotent: true, signal });
    },
  };
  return api;
}

/** exe.dev's answer to a `new` (`VM name "x" is not available`) or `cp` (`name "x" …`) whose name another VM or a launch under way holds. */
function isNameTaken(error: unknown, name: string): boolean {
  return isProviderApiError(error) && error.status === 422 && error.detail.includes(`name ${JSON.stringify(name)} is not available`);
}

/** How long a create waits for its own earlier launch to be listed (exe.dev's commands end within 30 s). */
const OWN_LAUNCH_WAIT_MS = 90_000;

/**
 * A launch (`new` or `cp`) of a name only this create uses (it carries the create's nonce). When
 * exe.dev says the name is taken, the holder is this create's own earlier attempt, still launching
 * after its answer was lost: that VM is waited for and used, never a second one made. It fails with
 * the refusal when the VM is not listed in time (the earlier launch failed; the lifecycle layer's
 * clean-up looks again).
 */
async function ownLaunch(api: Pick<ExeDevApi, "find">, name: string, launch: () => Promise<VmRecord>, signal: AbortSignal | undefined, wait: { totalMs?: number } & PollClock): Promise<VmRecord> {
  try {
    return await launch();
  } catch (error) {
    if (!isNameTaken(error, name)) throw error;
    try {
      const vm = await pollUntil(
        () => api.find(name, signal),
        (found) => found !== undefined,
        { what: `exe.dev to list VM ${name}`, timeoutMs: wait.totalMs ?? OWN_LAUNCH_WAIT_MS, intervalMs: 200, maxIntervalMs: 2_000, signal, ...wait },
      );
      return vm!;
    } catch (waited) {
      throw isPollTimeoutError(waited) ? error : waited;
    }
  }
}

/** `new` of a name only this create uses (see {@link ownLaunch}). */
export async function newOwnVm(api: Pick<ExeDevApi, "newVm" | "find">, request: NewVmRequest, signal?: AbortSignal, wait: { totalMs?: number } & PollClock = {}): Promise<VmRecord> {
  const vm = await ownLaunch(api, request.name, () => api.newVm(request, signal), signal, wait);
  return { ...vm, tags: vm.tags.length > 0 ? vm.tags : request.tags };
}

/**
 * `cp` of a template (or a setup VM) to a name only this create uses (see {@link ownLaunch}); the
 * copy as cp's answer names it, which is the SSH destination `ls` would list, so no `ls` follows
 * (only an answer without one is looked up). Its tags are added by {@link withTags}.
 */
export async function copyOwnVm(api: Pick<ExeDevApi, "copyVm" | "find">, request: CopyVmRequest, signal?: AbortSignal, wait: { totalMs?: number } & PollClock = {}): Promise<VmRecord> {
  return ownLaunch(
    api,
    request.name,
    async () => {
      const copied = await api.copyVm(request, signal);
      if (copied) return copied;
      const vm = await api.find(request.name, signal);
      if (!vm) throw new Error(`exe.dev does not list ${request.name}, the copy of ${request.source} it reported made`);
      return vm;
    },
    signal,
    wait,
  );
}

/** The VM with every tag of `tags` (the ones it lacks added with `tag`). */
export async function withTags(api: Pick<ExeDevApi, "tagVm">, vm: VmRecord, tags: readonly string[], signal?: AbortSignal): Promise<VmRecord> {
  const missing = tags.filter((tag) => !vm.tags.includes(tag));
  if (missing.length > 0) await api.tagVm(vm.name, missing, signal);
  return { ...vm, tags: [...vm.tags, ...missing] };
}

/** How long a delete waits for `ls` to stop listing the VM. */
const GONE_WAIT_MS = 60_000;

/** Resolves once exe.dev no longer lists the VM (a deletion confirmed); fails after `totalMs`. */
export async function waitUntilUnlisted(api: Pick<ExeDevApi, "find">, name: string, wait: { totalMs?: number; signal?: AbortSignal } & PollClock = {}): Promise<void> {
  await pollUntil(
    () => api.find(name, wait.signal),
    (vm) => vm === undefined,
    { what: `exe.dev to stop listing VM ${name} after rm (its deletion is not confirmed)`, timeoutMs: wait.totalMs ?? GONE_WAIT_MS, intervalMs: 100, maxIntervalMs: 2_000, ...wait },
  );
}

function flag(name: string, value: string): string {
  return `--${name}=${shellQuote(value)}`;
}

/** A field of an answer as non-blank text, else undefined. */
function textOf(raw: Record<string, unknown>, key: string): string | undefined {
  const value = raw[key];
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

/** An answer's `ssh_port`, when it is a port. */
function portOf(value: unknown): number | undefined {
  const port = typeof value === "number" ? value : typeof value === "string" && /^\d+$/.test(value) ? Number(value) : undefined;
  return port !== undefined && port > 0 && port < 65_536 ? port : undefined;
}

/** A VM object from `new` or an `ls` entry (also nested under `vm`/`data`, as some answers are). */
function vmRecordOf(value: unknown, depth = 0): VmRecord | undefined {
  if (!value || typeof value !== "object" || depth > 3) return undefined;
  const raw = value as Record<string, unknown>;
  const text = (key: string) => textOf(raw, key);
  const name = text("vm_name") ?? text("name");
  if (!name) return vmRecordOf(raw.vm, depth + 1) ?? vmRecordOf(raw.data, depth + 1);
  return {
    name,
    sshDest: text("ssh_dest") ?? (text("ssh_host") ? `${text("ssh_user") ? `${text("ssh_user")}@` : ""}${text("ssh_host")}` : `${name}.exe.xyz`),
    sshHost: text("ssh_host"),
    sshUser: text("ssh_user"),
    sshPort: portOf(raw.ssh_port),
    httpsUrl: text("https_url"),
    status: text("status"),
    tags: Array.isArray(raw.tags) ? raw.tags.filter((tag): tag is string => typeof tag === "string") : [],
  };
}

/**
 * The copy `cp --json` reports: `{name, state, source, ssh, elapsed}` (exe.dev's cp handler), whose
 * `ssh` is the copy's SSH destination, the `ssh_dest` `ls` lists (both exe.dev's `<vm>.exe.xyz`).
 * No tags: the provider copies with `--copy-tags=false`. Undefined for an answer without a
 * destination, or about another VM.
 */
function copyRecordOf(answer: unknown, name: string): VmRecord | undefined {
  if (!answer || typeof answer !== "object") return undefined;
  const raw = answer as Record<string, unknown>;
  const sshDest = textOf(raw, "ssh");
  if (!sshDest || textOf(raw, "name") !== name) return undefined;
  return { name, sshDest, sshPort: portOf(raw.ssh_port), status: textOf(raw, "state"), tags: [] };
}

/** exe.dev's 401 and 403 in words an operator can act on (the token itself never appears). */
function explain(error: unknown, command: string): unknown {
  if (!isProviderApiError(error)) return error;
  if (error.status === 401) {
    return error.with({
      detail: `exe.dev refused the API token (${error.detail || "invalid token"}); check the API token field or EXE_API_KEY, and that its signing key is still registered`,
    });
  }
  if (error.status === 403) {
    return error.with({
      detail: `the API token may not run "${command}" (${error.detail || "command not allowed by token permissions"}); make a token whose cmds include ${REQUIRED_TOKEN_CMDS.join(", ")} (and ${TEMPLATE_TOKEN_CMDS.join(", ")} for custom images)`,
    });
  }
  return error;
}
