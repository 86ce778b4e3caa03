import { randomBytes } from "node:crypto";
import fsp from "node:fs/promises";
import path from "node:path";
import { captureDisk, restoreDisk, type Sandbox } from "@paperclip-sandbox/sandbox-backend";

/**
 * Custom images for bubblewrap: a template is a copy of a sandbox's writable trees (workspace, home,
 * cache, /tmp) in `<state dir>/templates/<ref>/disk`, with its owner's labels beside it. Only the
 * worker's user can read the directory (0700); the jail never sees it. A sandbox started from a
 * template gets the copy before anything runs in it. The image tree (/usr, /etc, ...) is the host's
 * or the configured root filesystem, read-only, and is not part of a template.
 */

const REF_PATTERN = /^tpl-[0-9a-f]{24}$/;
const RECORD_FILE = "template.json";
const RECORD_MAX_BYTES = 16 * 1024;

interface TemplateRecord {
  version: 1;
  ref: string;
  labels: Record<string, string>;
  label: string | null;
  createdAt: string;
  bytes: number;
}

export const isTemplateRef = (value: string): boolean => REF_PATTERN.test(value);

const templatesDir = (stateDir: string) => path.join(stateDir, "templates");
const templateDir = (stateDir: string, ref: string) => path.join(templatesDir(stateDir), ref);

/** Copies the running sandbox's writable trees into a new template; the sandbox is frozen while it is copied. */
export async function captureTemplate(sandbox: Sandbox, stateDir: string, input: { labels: Readonly<Record<string, string>>; label: string | null }): Promise<TemplateRecord> {
  await fsp.mkdir(templatesDir(stateDir), { recursive: true, mode: 0o700 });
  const ref = `tpl-${randomBytes(12).toString("hex")}`;
  // Made under a temporary name and renamed: a template is either whole or absent.
  const staging = path.join(templatesDir(stateDir), `.staging-${ref}`);
  await fsp.mkdir(staging, { mode: 0o700 });
  try {
    const bytes = await captureDisk(sandbox, path.join(staging, "disk"));
    const record: TemplateRecord = { version: 1, ref, labels: { ...input.labels }, label: input.label?.slice(0, 200) ?? null, createdAt: new Date().toISOString(), bytes };
    await fsp.writeFile(path.join(staging, RECORD_FILE), JSON.stringify(record), { mode: 0o600 });
    await fsp.rename(staging, templateDir(stateDir, ref));
    return record;
  } catch (error) {
    await fsp.rm(staging, { recursive: true, force: true });
    throw error;
  }
}

/** The template's record; null when the ref is not a template ref or this state directory has no such template. */
export async function readTemplate(stateDir: string, ref: string): Promise<TemplateRecord | null> {
  if (!isTemplateRef(ref)) return null;
  let text: string;
  try {
    const file = await fsp.open(path.join(templateDir(stateDir, ref), RECORD_FILE), "r");
    try {
      const info = await file.stat();
      if (!info.isFile() || info.size > RECORD_MAX_BYTES) return null;
      text = await file.readFile("utf8");
    } finally {
      await file.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "ENOTDIR") return null;
    throw error;
  }
  const record = JSON.parse(text) as TemplateRecord;
  return record.version === 1 && record.ref === ref && record.labels && typeof record.labels === "object" ? record : null;
}

/** Fills a fresh sandbox's writable trees from the template, before anything runs in it. */
export async function restoreTemplate(sandbox: Sandbox, stateDir: string, ref: string): Promise<void> {
  if (!isTemplateRef(ref)) throw new Error(`template "${ref.slice(0, 80)}" is not a bubblewrap template ref`);
  await restoreDisk(path.join(templateDir(stateDir, ref), "disk"), sandbox);
}

export async function deleteTemplate(stateDir: string, ref: string): Promise<void> {
  if (!isTemplateRef(ref)) return;
  await fsp.rm(templateDir(stateDir, ref), { recursive: true, force: true });
}
