/**
 * Workspace names: Coder workspaces have no labels, so a name carries what labels would, in the 32
 * characters Coder allows: `<prefix>-<owner:6><run:6><nonce:4>`, hex hashes of the lease labels
 * (provider, company and environment; the run). Every acquisition gets a new name (the nonce); the
 * name is checked before a workspace is deleted, kept or resumed, and a lost create is found by it.
 */
import { createHash, randomBytes } from "node:crypto";
import { labelValue } from "@paperclip-sandbox/kit";

const OWNER_HEX = 6;
const RUN_HEX = 6;
const NONCE_HEX = 4;

const PROVIDER_LABEL = "paperclip-provider";
const COMPANY_LABEL = "paperclip-company";
const ENVIRONMENT_LABEL = "paperclip-environment";
const RUN_LABEL = "paperclip-run";

export interface NameOwner {
  driverKey: string;
  companyId: string;
  environmentId: string;
}

const hash = (text: string, length: number) => createHash("sha256").update(text).digest("hex").slice(0, length);

/** The owner part, from label values as the kit writes them. */
function ownerPart(labels: Readonly<Record<string, string | undefined>>): string {
  return hash(`paperclip-sandbox:coder-owner:${labels[PROVIDER_LABEL] ?? ""}\u0000${labels[COMPANY_LABEL] ?? ""}\u0000${labels[ENVIRONMENT_LABEL] ?? ""}`, OWNER_HEX);
}

function runPart(runLabel: string): string {
  return hash(`paperclip-sandbox:coder-run:${runLabel}`, RUN_HEX);
}

/** The labels the kit would put on a lease of this owner (label values, not raw ids). */
export function ownerLabels(owner: NameOwner): Record<string, string> {
  return { [PROVIDER_LABEL]: labelValue(owner.driverKey), [COMPANY_LABEL]: labelValue(owner.companyId), [ENVIRONMENT_LABEL]: labelValue(owner.environmentId) };
}

/** A fresh workspace name for one acquisition, from its lease labels. */
export function workspaceNameFor(prefix: string, labels: Readonly<Record<string, string>>, nonce = randomBytes(NONCE_HEX / 2).toString("hex")): string {
  return `${prefix}-${ownerPart(labels)}${runPart(labels[RUN_LABEL] ?? "")}${nonce}`;
}

interface ParsedName {
  owner: string;
  run: string;
}

/** The hashes in a name this prefix made; undefined for any other name. */
function parseWorkspaceName(name: string, prefix: string): ParsedName | undefined {
  const match = new RegExp(`^${prefix}-([0-9a-f]{${OWNER_HEX}})([0-9a-f]{${RUN_HEX}})[0-9a-f]{${NONCE_HEX}}$`).exec(name);
  return match ? { owner: match[1]!, run: match[2]! } : undefined;
}

/** Whether a name was made for these labels: provider, company and environment, and the run when the labels name one. */
export function nameMatchesLabels(name: string, prefix: string, labels: Readonly<Record<string, string | undefined>>): boolean {
  const parsed = parseWorkspaceName(name, prefix);
  if (!parsed || parsed.owner !== ownerPart(labels)) return false;
  const run = labels[RUN_LABEL];
  return run === undefined || parsed.run === runPart(run);
}

/**
 * The labels a workspace stands for: the owner's labels when its name was made for them, else labels
 * that name nobody (so every ownership check refuses it).
 */
export function labelsOfName(name: string, prefix: string, owner: NameOwner): Record<string, string> {
  const labels = ownerLabels(owner);
  return nameMatchesLabels(name, prefix, labels) ? labels : { [PROVIDER_LABEL]: labelValue(owner.driverKey), [COMPANY_LABEL]: "not-this-company", [ENVIRONMENT_LABEL]: "not-this-environment" };
}
