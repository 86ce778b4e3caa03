import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { labelValue, type TemplateDeclaration } from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import type { DaytonaConfig } from "./config.js";
import { DAYTONA_DRIVER_KEY, DAYTONA_TEMPLATES } from "./manifest.js";
import type { DaytonaHandle } from "./sandboxes.js";

/**
 * Custom images on Daytona: a template is a Daytona snapshot of the setup sandbox
 * (`sandbox.createSnapshot`), which later sandboxes are created from by name (the config's
 * `snapshot`). A Daytona snapshot carries no labels, so its owner is written into its name:
 * `paperclip-tpl-<n>-<company>-<m>-<environment>-<random>`, each id as the kit writes it into a
 * label and prefixed by its length (so no id can be read as another). A snapshot whose name does not
 * start with the prefix is one the operator chose and is never treated as a template.
 */
const PREFIX = "paperclip-tpl-";
/** Seconds the SDK may wait for the sandbox to leave `snapshotting` (a large disk takes a while). */
const SNAPSHOT_TIMEOUT_SEC = 900;
/** How often a snapshot not yet active is looked at again. */
const POLL_MS = 1_000;

export const isDaytonaTemplateRef = (value: string): boolean => value.startsWith(PREFIX);

/** The snapshot name of a new template of this owner. */
export function templateName(labels: Readonly<Record<string, string>>): string {
  const part = (key: string) => {
    const value = labels[key];
    if (!value) throw new Error(`daytona: the setup sandbox has no ${key} label, so its template could not name its owner`);
    return `${value.length}-${value}`;
  };
  return `${PREFIX}${part("paperclip-company")}-${part("paperclip-environment")}-${randomBytes(6).toString("hex")}`;
}

/** The owner labels a template's name carries; null when the name is not one `templateName` makes. */
export function templateOwner(name: string): Record<string, string> | null {
  if (!isDaytonaTemplateRef(name)) return null;
  let rest = name.slice(PREFIX.length);
  const take = (): string | null => {
    const match = /^(\d{1,3})-/.exec(rest);
    if (!match) return null;
    const length = Number(match[1]);
    const value = rest.slice(match[0].length, match[0].length + length);
    if (value.length !== length || rest[match[0].length + length] !== "-") return null;
    rest = rest.slice(match[0].length + length + 1);
    return value;
  };
  const company = take();
  const environment = company === null ? null : take();
  if (company === null || environment === null || !/^[0-9a-f]{12}$/.test(rest)) return null;
  return {
    "paperclip-provider": labelValue(DAYTONA_DRIVER_KEY),
    "paperclip-company": company,
    "paperclip-environment": environment,
  };
}

const FAILED_STATES = new Set(["error", "build_failed", "removing"]);

/** Capture, ownership and delete of Daytona snapshot templates, for the kit's five custom-image hooks. */
export function daytonaTemplates(clientFor: (config: DaytonaConfig) => DaytonaClient): TemplateDeclaration<DaytonaHandle, DaytonaConfig> {
  /** The snapshot, or null when Daytona has none of that name. */
  const snapshotOf = (client: DaytonaClient, name: string) =>
    client
      .call("getSnapshot", () => client.sdk.snapshot.get(name), {
        idempotent: true,
        safeMethod: true,
      })
      .catch((error: unknown) => {
        if ((error as { gone?: boolean }).gone) return null;
        throw error;
      });

  return {
    ...DAYTONA_TEMPLATES,
    isTemplateRef: isDaytonaTemplateRef,
    async capture(handle, ref, { labels, signal }) {
      const client = clientFor(ref.config);
      const name = templateName(labels);
      // Not repeated: a second snapshot of the same name would be refused (409) or a duplicate.
      await client.call("createSandboxSnapshot", () => handle.sandbox.createSnapshot(name, SNAPSHOT_TIMEOUT_SEC), { idempotent: false, attempts: 1, signal });
      // Usable once the snapshot itself is active (it may still be pulled into the registry).
      for (;;) {
        const snapshot = await snapshotOf(client, name);
        if (snapshot?.state === "active") return { templateRef: name, metadata: { snapshotId: snapshot.id } };
        if (!snapshot || FAILED_STATES.has(snapshot.state)) {
          throw new Error(`daytona snapshot ${name} of sandbox ${handle.providerLeaseId} did not become usable: ${snapshot ? `${snapshot.state} ${snapshot.errorReason ?? ""}`.trim() : "it is gone"}`);
        }
        await sleep(POLL_MS, undefined, { signal });
      }
    },
    async labels(templateRef, config) {
      const owner = templateOwner(templateRef);
      if (!owner) return null;
      return (await snapshotOf(clientFor(config), templateRef)) ? owner : null;
    },
    async delete(templateRef, config) {
      const client = clientFor(config);
      await client
        .call("deleteSnapshot", () => client.sdk.snapshot.delete(templateRef), {
          idempotent: true,
          safeMethod: true,
        })
        .catch((error: unknown) => {
          if (!(error as { gone?: boolean }).gone) throw error;
        });
    },
  };
}
