import { randomBytes } from "node:crypto";
import { checkTimeScale, type VendorClock } from "@paperclip-sandbox/emulator-kit";

/** One boxd account: an API key fenced to one org, as boxd issues them. */
export interface BoxdAccount {
  /** `bxd_` and ~40 base62 characters. */
  apiKey: string;
  /** What the token exchange and Whoami answer (e.g. a GitHub user name). */
  userId: string;
  /** The org the key is fenced to (its slug). */
  org: string;
  displayName?: string;
}

/** What a test can see and change of the emulator while it runs (handed to `expose`). */
export interface BoxdEmulatorControl {
  /** The machines as boxd holds them (a copy). */
  machines(): Array<{
    id: string;
    name: string;
    org: string;
    owner: string;
    status: string;
    vcpu: number;
    memoryBytes: number;
    isolated: boolean;
    labels: Record<string, string>;
    destroyAt: number | null;
    legacyAgent: boolean;
    snapshot: string | null;
  }>;
  /** Makes a machine's in-VM agent one that predates the file API (WriteFile answers UNIMPLEMENTED). */
  setLegacyAgent(vmId: string, legacy: boolean): void;
  /** Token exchanges answered so far, per API key. */
  exchanges(apiKey: string): number;
}

export interface BoxdEmulatorOptions {
  /** The accounts whose keys the exchange accepts; default one account with a random key, org "personal". */
  accounts?: BoxdAccount[];
  /**
   * Speed of boxd's clocks (the delete timer, auto-suspend, auto-hibernate): boxd ms per real ms.
   * Default 1; 1000 makes a 15-minute delete timer fire after 0.9 s.
   */
  timeScale?: number;
  /** The clock itself (a test's manual clock); overrides `timeScale`. */
  clock?: VendorClock;
  /** Lifetime of the exchanged JWTs (real seconds). Default 3600 (boxd's ~1 h). */
  tokenTtlSeconds?: number;
  /** Machines an org may have at once (destroyed ones do not count). Default 50. */
  maxMachinesPerOrg?: number;
  /** Every new machine's agent predates the file API (WriteFile answers UNIMPLEMENTED). Default false. */
  legacyAgent?: boolean;
  /** gRPC port (default: any free port). */
  port?: number;
  /** Token-exchange HTTP port (default: any free port). */
  exchangePort?: number;
  /** Parent of the emulator's scratch directory (default the OS temp dir; keep it short). */
  scratchParent?: string;
  /** Called once at start with the control surface (tests, the e2e). */
  expose?(control: BoxdEmulatorControl): void;
}

export interface ResolvedOptions {
  accounts: BoxdAccount[];
  timeScale: number;
  clock: VendorClock | undefined;
  tokenTtlSeconds: number;
  maxMachinesPerOrg: number;
  legacyAgent: boolean;
  port: number | undefined;
  exchangePort: number | undefined;
  scratchParent: string | undefined;
  expose: BoxdEmulatorOptions["expose"];
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A key in boxd's format: `bxd_` and 40 base62 characters. */
export function newApiKey(): string {
  const bytes = randomBytes(40);
  return `bxd_${[...bytes].map((b) => BASE62[b % 62]).join("")}`;
}

/** Refuses bad options naming the option and the rule. */
export function resolveOptions(options: BoxdEmulatorOptions): ResolvedOptions {
  const positive = (name: string, value: number | undefined, fallback: number): number => {
    if (value === undefined) return fallback;
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) throw new TypeError(`boxd emulator option ${name}: must be a positive number`);
    return value;
  };
  const accounts = options.accounts ?? [{ apiKey: newApiKey(), userId: "paperclip-e2e", org: "personal", displayName: "Paperclip Emulator" }];
  if (!Array.isArray(accounts) || accounts.length === 0) throw new TypeError("boxd emulator option accounts: must list at least one account");
  const keys = new Set<string>();
  for (const [i, account] of accounts.entries()) {
    if (!/^bx[dk]_[A-Za-z0-9]{20,}$/.test(account.apiKey ?? "")) throw new TypeError(`boxd emulator option accounts[${i}].apiKey: must be bxd_ followed by base62 characters`);
    if (!account.userId) throw new TypeError(`boxd emulator option accounts[${i}].userId: required`);
    if (!/^[a-z0-9][a-z0-9-]*$/.test(account.org ?? "")) throw new TypeError(`boxd emulator option accounts[${i}].org: must be a lowercase slug`);
    if (keys.has(account.apiKey)) throw new TypeError(`boxd emulator option accounts[${i}].apiKey: listed twice`);
    keys.add(account.apiKey);
  }
  if (options.maxMachinesPerOrg !== undefined && (!Number.isInteger(options.maxMachinesPerOrg) || options.maxMachinesPerOrg < 1)) {
    throw new TypeError("boxd emulator option maxMachinesPerOrg: must be a positive integer");
  }
  return {
    accounts,
    timeScale: checkTimeScale(options.timeScale, "boxd emulator option timeScale"),
    clock: options.clock,
    tokenTtlSeconds: positive("tokenTtlSeconds", options.tokenTtlSeconds, 3600),
    maxMachinesPerOrg: options.maxMachinesPerOrg ?? 50,
    legacyAgent: options.legacyAgent === true,
    port: options.port,
    exchangePort: options.exchangePort,
    scratchParent: options.scratchParent,
    expose: options.expose,
  };
}
