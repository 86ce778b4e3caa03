import { isOwnedTemplateName, ownedTemplateName, pollUntil, templateNameOwner, type PollClock, type TemplateDeclaration } from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import type { DaytonaConfig } from "./config.js";
import { DAYTONA_TEMPLATES } from "./manifest.js";
import type { DaytonaHandle } from "./sandboxes.js";

/**
 * Custom images on Daytona: a template is a Daytona snapshot of the setup sandbox
 * (`sandbox.createSnapshot`), which later sandboxes are created from by name (the config's
 * `snapshot`). A Daytona snapshot carries no labels, so its owner is written into its name (the
 * kit's `ownedTemplateName`); a snapshot named otherwise is one the operator chose and is never
 * treated as a template.
 */
/** Seconds the SDK may wait for the sandbox to leave `snapshotting` (a large disk takes a while). */
const SNAPSHOT_TIMEOUT_SEC = 900;
/** A snapshot not yet active is looked at again from this pause, doubling up to the cap. */
const POLL_FIRST_MS = 250;
const POLL_MAX_MS = 2_000;

const FAILED_STATES = new Set(["error", "build_failed", "removing"]);

/** Capture, ownership and delete of Daytona snapshot templates, for the kit's five custom-image hooks. */
export function daytonaTemplates(clientFor: (config: DaytonaConfig) => DaytonaClient, clock: PollClock = {}): TemplateDeclaration<DaytonaHandle, DaytonaConfig> {
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
    isTemplateRef: isOwnedTemplateName,
    async capture(handle, ref, { labels, signal }) {
      const client = clientFor(ref.config);
      const name = ownedTemplateName(labels);
      // Not repeated: a second snapshot of the same name would be refused (409) or a duplicate.
      await client.call("createSandboxSnapshot", () => handle.sandbox.createSnapshot(name, SNAPSHOT_TIMEOUT_SEC), { idempotent: false, attempts: 1, signal });
      // Usable once the snapshot itself is active (it may still be pulled into the registry).
      const snapshot = await pollUntil(
        () => snapshotOf(client, name),
        (seen) => !seen || seen.state === "active" || FAILED_STATES.has(seen.state),
        { what: `daytona snapshot ${name} to become active`, intervalMs: POLL_FIRST_MS, maxIntervalMs: POLL_MAX_MS, signal, ...clock },
      );
      if (snapshot?.state === "active") return { templateRef: name, metadata: { snapshotId: snapshot.id } };
      throw new Error(`daytona snapshot ${name} of sandbox ${handle.providerLeaseId} did not become usable: ${snapshot ? `${snapshot.state} ${snapshot.errorReason ?? ""}`.trim() : "it is gone"}`);
    },
    async labels(templateRef, config, expected) {
      const owner = templateNameOwner(templateRef, expected);
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
