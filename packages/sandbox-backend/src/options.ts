/** Validation of what callers hand the backend: each problem names the field and the rule. */
import net from "node:net";
import path from "node:path";
import { SandboxInputError } from "./errors.js";
import { checkSandboxId, newSandboxId } from "./ids.js";
import { SANDBOX_GID, SANDBOX_PATHS, SANDBOX_UID, SANDBOX_USER } from "./jail/argv.js";
import type { CreateSandboxOptions, EgressSpec, ExecOptions, SandboxLimits, SandboxUser } from "./types.js";

/** The longest a sandbox may live (and the furthest extendTtl may move its expiry). */
export const MAX_TTL_MS = 366 * 24 * 60 * 60 * 1000;
const MAX_ENV_VARS = 1024;
const MAX_ENV_BYTES = 1024 * 1024;
const MAX_LABELS = 64;
const MAX_METADATA_BYTES = 64 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FQDN = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.?$/i;
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

export interface NormalizedCreate {
  id: string;
  rootfs: string | null;
  env: Record<string, string>;
  limits: SandboxLimits;
  expiresAt: number;
  egress: EgressSpec;
  labels: Record<string, string>;
  metadata: Record<string, unknown>;
  user: ResolvedSandboxUser;
  mounts: ResolvedMount[];
}

interface ResolvedMount {
  path: string;
  readOnly: boolean;
  volume?: string;
  subPath?: string;
}

/** The sandbox user with every default filled in. */
interface ResolvedSandboxUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

const DEFAULT_SANDBOX_USER: ResolvedSandboxUser = { name: SANDBOX_USER, uid: SANDBOX_UID, gid: SANDBOX_GID, home: SANDBOX_PATHS.home };

const RESERVED_MOUNT_ROOTS = ["/proc", "/dev", "/sys", "/opt/paperclip", SANDBOX_PATHS.egressDir, "/etc/passwd", "/etc/group", "/etc/hosts"];

/** An absolute, normalized in-jail path (no `.`/`..` segments, no doubled or trailing slash). */
function checkJailPath(value: unknown, field: string): string {
  if (typeof value !== "string" || !value.startsWith("/") || value.length > 4096 || value.includes("\0") || path.posix.normalize(value) !== value || (value.length > 1 && value.endsWith("/"))) {
    throw new SandboxInputError(`${field} must be an absolute, normalized in-sandbox path`);
  }
  return value;
}

function checkUser(value: unknown): ResolvedSandboxUser {
  if (value === undefined) return DEFAULT_SANDBOX_USER;
  if (!isPlainObject(value)) throw new SandboxInputError("user must be an object {name, uid, gid, home}");
  const user = value as SandboxUser;
  const name = user.name ?? DEFAULT_SANDBOX_USER.name;
  if (typeof name !== "string" || !/^[a-z_][a-z0-9_-]{0,31}$/.test(name) || name === "root" || name === "nobody") {
    throw new SandboxInputError("user.name must be 1-32 of [a-z0-9_-], starting with a letter or _, and not root or nobody");
  }
  const id = (field: "uid" | "gid") => {
    const given = user[field] ?? DEFAULT_SANDBOX_USER[field];
    if (typeof given !== "number" || !Number.isInteger(given) || given < 0 || given >= 65534) throw new SandboxInputError(`user.${field} must be an integer in [0, 65533]`);
    return given;
  };
  const home = checkJailPath(user.home ?? DEFAULT_SANDBOX_USER.home, "user.home");
  if (home === "/" || RESERVED_MOUNT_ROOTS.some((root) => home === root || home.startsWith(`${root}/`)) || [SANDBOX_PATHS.workspace, SANDBOX_PATHS.tmp].includes(home as never)) {
    throw new SandboxInputError(`user.home must not be /, /workspace, /tmp or a system path (got ${home})`);
  }
  return { name, uid: id("uid"), gid: id("gid"), home };
}

function checkMounts(value: unknown): ResolvedMount[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > 32) throw new SandboxInputError("mounts must be a list of at most 32 {path, readOnly}");
  const seen = new Set<string>();
  return value.map((mount, index) => {
    if (!isPlainObject(mount)) throw new SandboxInputError(`mounts[${index}] must be an object {path, readOnly}`);
    const at = checkJailPath(mount.path, `mounts[${index}].path`);
    if (at === "/" || RESERVED_MOUNT_ROOTS.some((root) => at === root || at.startsWith(`${root}/`))) {
      throw new SandboxInputError(`mounts[${index}].path must not be / or under /proc, /dev, /sys, /opt/paperclip or ${SANDBOX_PATHS.egressDir} (got ${at})`);
    }
    if (seen.has(at)) throw new SandboxInputError(`mounts[${index}].path ${at} is given twice`);
    seen.add(at);
    if (mount.readOnly !== undefined && typeof mount.readOnly !== "boolean") throw new SandboxInputError(`mounts[${index}].readOnly must be a boolean`);
    if (mount.volume !== undefined && (typeof mount.volume !== "string" || !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(mount.volume))) {
      throw new SandboxInputError(`mounts[${index}].volume must be a DNS label (1-63 of [a-z0-9-])`);
    }
    const sub = mount.subPath;
    if (sub !== undefined && (typeof sub !== "string" || sub === "" || sub.startsWith("/") || sub.includes("\0") || sub.split("/").some((part) => part === ".." || part === "." || part === ""))) {
      throw new SandboxInputError(`mounts[${index}].subPath must be a relative path without . or .. segments`);
    }
    return { path: at, readOnly: mount.readOnly === true, ...(mount.volume !== undefined ? { volume: mount.volume } : {}), ...(sub !== undefined ? { subPath: sub } : {}) };
  });
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null);

function checkEnv(value: unknown, field = "env"): Record<string, string> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new SandboxInputError(`${field} must be an object of string values`);
  const entries = Object.entries(value);
  if (entries.length > MAX_ENV_VARS) throw new SandboxInputError(`${field} may have at most ${MAX_ENV_VARS} variables`);
  let bytes = 0;
  for (const [name, text] of entries) {
    if (!ENV_NAME.test(name)) throw new SandboxInputError(`${field} name ${JSON.stringify(name.slice(0, 64))} must match ${ENV_NAME.source}`);
    if (typeof text !== "string" || text.includes("\0")) throw new SandboxInputError(`${field}.${name} must be a string without NUL bytes`);
    bytes += name.length + Buffer.byteLength(text);
  }
  if (bytes > MAX_ENV_BYTES) throw new SandboxInputError(`${field} must be at most ${MAX_ENV_BYTES} bytes in all`);
  return { ...(value as Record<string, string>) };
}

function checkLimits(value: unknown): SandboxLimits {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new SandboxInputError("limits must be an object {cpu?, memoryMb?, pids?, diskMb?}");
  const limits: SandboxLimits = {};
  const { cpu, memoryMb, pids, diskMb, ...rest } = value;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new SandboxInputError(`limits has unknown field ${unknown[0]} (known: cpu, memoryMb, pids, diskMb)`);
  if (diskMb !== undefined) {
    if (typeof diskMb !== "number" || !Number.isInteger(diskMb) || diskMb < 16 || diskMb > 16_777_216) throw new SandboxInputError("limits.diskMb must be an integer in [16, 16777216]");
    limits.diskMb = diskMb;
  }
  if (cpu !== undefined) {
    if (typeof cpu !== "number" || !Number.isFinite(cpu) || cpu <= 0 || cpu > 1024) throw new SandboxInputError("limits.cpu must be a number of cores in (0, 1024]");
    limits.cpu = cpu;
  }
  if (memoryMb !== undefined) {
    if (typeof memoryMb !== "number" || !Number.isInteger(memoryMb) || memoryMb < 4 || memoryMb > 1_048_576) throw new SandboxInputError("limits.memoryMb must be an integer in [4, 1048576]");
    limits.memoryMb = memoryMb;
  }
  if (pids !== undefined) {
    if (typeof pids !== "number" || !Number.isInteger(pids) || pids < 1 || pids > 4_194_304) throw new SandboxInputError("limits.pids must be an integer in [1, 4194304]");
    limits.pids = pids;
  }
  return limits;
}

function cidrProblem(value: string): string | null {
  const [address = "", prefix, ...rest] = value.trim().split("/");
  const family = net.isIP(address);
  if (rest.length > 0 || family === 0) return "must be an IPv4/IPv6 address or CIDR (e.g. 10.0.0.0/8)";
  if (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))) return `prefix must be 0-${family === 4 ? 32 : 128}`;
  return null;
}

function checkEgress(value: unknown): EgressSpec {
  if (value === undefined) return { allowFqdns: [], allowCidrs: [] };
  if (!isPlainObject(value)) throw new SandboxInputError("egress must be an object {allowFqdns, allowCidrs}");
  const list = (field: "allowFqdns" | "allowCidrs") => {
    const items = value[field] ?? [];
    if (!Array.isArray(items) || !items.every((item) => typeof item === "string")) throw new SandboxInputError(`egress.${field} must be a list of strings`);
    return items as string[];
  };
  const allowFqdns = list("allowFqdns").map((name) => name.trim().toLowerCase());
  for (const name of allowFqdns) if (!FQDN.test(name)) throw new SandboxInputError(`egress.allowFqdns entry ${JSON.stringify(name.slice(0, 80))} must be a host name or *.domain`);
  const allowCidrs = list("allowCidrs").map((cidr) => cidr.trim());
  for (const cidr of allowCidrs) {
    const problem = cidrProblem(cidr);
    if (problem) throw new SandboxInputError(`egress.allowCidrs entry ${JSON.stringify(cidr.slice(0, 80))} ${problem}`);
  }
  return { allowFqdns: [...new Set(allowFqdns)], allowCidrs: [...new Set(allowCidrs)] };
}

export function checkLabels(value: unknown, field = "labels"): Record<string, string> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new SandboxInputError(`${field} must be an object of string values`);
  const entries = Object.entries(value);
  if (entries.length > MAX_LABELS) throw new SandboxInputError(`${field} may have at most ${MAX_LABELS} entries`);
  for (const [key, text] of entries) {
    if (key.length === 0 || key.length > 128 || CONTROL_CHARS.test(key)) throw new SandboxInputError(`${field} key ${JSON.stringify(key.slice(0, 64))} must be 1-128 printable characters`);
    if (typeof text !== "string" || text.length > 1024 || CONTROL_CHARS.test(text)) throw new SandboxInputError(`${field}.${key.slice(0, 64)} must be a string of at most 1024 printable characters`);
  }
  return { ...(value as Record<string, string>) };
}

export function checkMetadata(value: unknown, field = "metadata"): Record<string, unknown> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new SandboxInputError(`${field} must be a JSON object`);
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch {
    throw new SandboxInputError(`${field} must be JSON-serializable`);
  }
  if (Buffer.byteLength(text) > MAX_METADATA_BYTES) throw new SandboxInputError(`${field} must be at most ${MAX_METADATA_BYTES} bytes as JSON`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** An expiry (epoch ms) in the future and at most MAX_TTL_MS from now. */
export function checkExpiry(value: unknown, field: string, now = Date.now()): number {
  if (typeof value !== "number" || !Number.isFinite(value)) throw new SandboxInputError(`${field} must be a time in epoch milliseconds`);
  if (value <= now) throw new SandboxInputError(`${field} must be in the future`);
  if (value - now > MAX_TTL_MS) throw new SandboxInputError(`${field} may be at most ${MAX_TTL_MS} ms from now`);
  return Math.floor(value);
}

export function normalizeCreate(options: CreateSandboxOptions, now = Date.now()): NormalizedCreate {
  if (!isPlainObject(options)) throw new SandboxInputError("create needs an options object");
  const id = options.id === undefined ? newSandboxId() : checkSandboxId(options.id);
  if (options.rootfs !== undefined && (typeof options.rootfs !== "string" || !options.rootfs.startsWith("/"))) {
    throw new SandboxInputError("rootfs must be an absolute host path");
  }
  if ((options.ttlMs === undefined) === (options.expiresAt === undefined)) throw new SandboxInputError("give exactly one of ttlMs and expiresAt");
  let expiresAt: number;
  if (options.ttlMs !== undefined) {
    if (typeof options.ttlMs !== "number" || !Number.isFinite(options.ttlMs) || options.ttlMs <= 0 || options.ttlMs > MAX_TTL_MS) {
      throw new SandboxInputError(`ttlMs must be a number of milliseconds in (0, ${MAX_TTL_MS}]`);
    }
    expiresAt = Math.floor(now + options.ttlMs);
  } else {
    expiresAt = checkExpiry(options.expiresAt, "expiresAt", now);
  }
  return {
    id,
    rootfs: options.rootfs ?? null,
    env: checkEnv(options.env),
    limits: checkLimits(options.limits),
    expiresAt,
    egress: checkEgress(options.egress),
    labels: checkLabels(options.labels),
    metadata: checkMetadata(options.metadata),
    user: checkUser(options.user),
    mounts: checkMounts(options.mounts),
  };
}

/** Checks an exec request before it goes to the supervisor (which checks it again). */
export function checkExecOptions(options: ExecOptions): void {
  if (!isPlainObject(options)) throw new SandboxInputError("exec needs an options object");
  const hasArgv = options.argv !== undefined;
  if (hasArgv === (options.script !== undefined)) throw new SandboxInputError("exec needs exactly one of argv and script");
  if (hasArgv && (!Array.isArray(options.argv) || options.argv.length === 0 || !options.argv.every((arg) => typeof arg === "string" && !arg.includes("\0")))) {
    throw new SandboxInputError("argv must be a non-empty list of strings without NUL bytes");
  }
  if (!hasArgv && (typeof options.script !== "string" || options.script.includes("\0"))) throw new SandboxInputError("script must be a string without NUL bytes");
  if (options.cwd !== undefined && (typeof options.cwd !== "string" || !options.cwd.startsWith("/"))) throw new SandboxInputError("cwd must be an absolute in-sandbox path");
  checkEnv(options.env, "exec env");
  for (const field of ["timeoutMs", "killGraceMs"] as const) {
    const value = options[field];
    if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > 2 ** 31 - 1)) {
      throw new SandboxInputError(`${field} must be a positive number of milliseconds`);
    }
  }
  if (options.tag !== undefined && (typeof options.tag !== "string" || options.tag.length > 256)) throw new SandboxInputError("tag must be a string of at most 256 characters");
  const limit = options.outputLimitBytes as unknown;
  if (limit !== undefined && (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > 16 * 1024 * 1024)) {
    throw new SandboxInputError("outputLimitBytes must be an integer in [1, 16777216]");
  }
}
