import type { PluginContext } from "@paperclipai/plugin-sdk";
import {
  createSecretRedactor,
  defaultProbe,
  defineSandboxProvider,
  LeaseGoneError,
  TemplateRefError,
  probeResult,
  secretFieldPaths,
  secretValuesOf,
  type ProbeFinding,
  type Redactor,
  type SandboxProviderDefinition,
  withCommandChannel,
} from "@paperclip-sandbox/kit";
import { createAccounts, isGone, loadModalSdk, modalError, type ModalAccount, type ModalSdk } from "./client.js";
import { billingWarning, billsWhileReused, credentialsOf, modalConfig, modalConfigSchema, type ModalConfig } from "./config.js";
import { modalLeaseIds, newLeaseName, type ModalLeaseRef } from "./lease-id.js";
import { MODAL_DRIVER_KEY, MODAL_SHAPE } from "./manifest.js";
import { createSandbox, deleteImage, handleOf, inspect, sandboxesLabelled, TAGS, terminate, type ModalHandle } from "./sandboxes.js";
import { modalPty } from "./pty.js";
import { createModalRunner } from "./transport.js";
import { createTemplateImages, isTemplateName, modalTemplates } from "./templates.js";

export interface ModalPluginDeps {
  /** The worker's environment (token fallbacks MODAL_TOKEN_ID / MODAL_TOKEN_SECRET). */
  env?: NodeJS.ProcessEnv;
  /** Loads the `modal` SDK (tests may hand in their own copy). */
  loadSdk?: () => Promise<ModalSdk>;
}

/** The lease labels a new sandbox of a lease carries, without the provider's per-sandbox tags. */
function leaseTags(tags: Readonly<Record<string, string>>): Record<string, string> {
  const kept = { ...tags };
  for (const name of [TAGS.expiresAt, TAGS.snapshot, TAGS.snapshotBase]) delete kept[name];
  return kept;
}

export function createModalPlugin(deps: ModalPluginDeps = {}) {
  const env = deps.env ?? process.env;
  let ctx: PluginContext | undefined;
  const accounts = createAccounts({ loadSdk: deps.loadSdk ?? loadModalSdk, env, logger: () => ctx?.logger });
  const secretPaths = secretFieldPaths(modalConfig.jsonSchema);
  /** Redacts the config's secrets and the tokens taken from the worker's environment. */
  const redactorOf = (config: ModalConfig, from: NodeJS.ProcessEnv = env): Redactor => {
    const { credentials } = credentialsOf(config, from);
    return createSecretRedactor([...secretValuesOf(config, secretPaths), ...(credentials ? [credentials.tokenId, credentials.tokenSecret] : [])]).redact;
  };
  const accountOf = (config: ModalConfig, from: NodeJS.ProcessEnv = env): Promise<ModalAccount> => accounts.of(config, redactorOf(config, from), from);

  /** The lease's current sandbox as Modal has it now; null when it is gone. */
  async function find(config: ModalConfig, ref: ModalLeaseRef | undefined): Promise<ModalHandle | null> {
    if (!ref) return null;
    const account = await accountOf(config);
    const { client } = account;
    if (ref.kind === "sandbox") {
      const sandbox = await client.sandboxes.fromId(ref.sandboxId);
      const seen = await inspect(account, sandbox);
      return seen?.running ? handleOf(account, ref, sandbox, seen.tags) : null;
    }
    let sandbox;
    try {
      sandbox = await account.call(
        "findSandbox",
        () => client.sandboxes.fromName(config.appName, ref.name, { includeTerminated: true, ...(config.environment ? { environment: config.environment } : {}) }),
        { idempotent: true },
      );
    } catch (error) {
      if (isGone(error)) return null;
      throw error;
    }
    const seen = await inspect(account, sandbox);
    if (!seen) return null;
    if (seen.running) return handleOf(account, ref, sandbox, seen.tags);
    // Ended: resumable only from the snapshot its release took, while that image exists.
    const snapshot = seen.tags[TAGS.snapshot];
    if (!snapshot) return null;
    try {
      await account.call("findImage", () => client.images.fromId(snapshot), { idempotent: true });
    } catch (error) {
      if (isGone(error)) return null;
      throw error;
    }
    return handleOf(account, ref, sandbox, seen.tags, "stopped");
  }

  const templateImages = createTemplateImages();
  /** The config's image: a registry tag, or a custom image (the kit has checked it is this company's and environment's). */
  async function imageOf(account: ModalAccount, config: ModalConfig) {
    if (!isTemplateName(config.image)) return account.registryImage(config.image);
    const image = await templateImages.take(account, config.image);
    if (!image) throw new TemplateRefError(`image: the custom image ${config.image} is gone (deleted since the run was checked); capture a new one`);
    return image;
  }

  const definition: SandboxProviderDefinition<typeof modalConfigSchema, ModalHandle> = {
    driverKey: MODAL_DRIVER_KEY,
    config: modalConfig,
    transport: MODAL_SHAPE.transport,
    // Made at acquire through the runner, which also proves the image runs commands (a broken
    // image fails the acquire, not the first execute).
    workspace: { path: (config) => config.workdir },
    shape: (config) => ({ appName: config.appName, image: config.image, environment: config.environment ?? null, workdir: config.workdir, serverUrl: config.serverUrl }),
    options: { ttlMs: (config) => config.sandboxTimeoutMs, commandTimeoutMs: (config) => config.execTimeoutMs },
    // Modal has no pause. A sandbox-id lease keeps running (billed until its timeout or idle
    // timeout); a lease kept by snapshots is stopped: its filesystem saved, its sandbox ended.
    keep: { reusable: (config) => config.reuseLease, by: (handle) => (handle.ref.kind === "named" ? "stop" : "leave-running") },
    leaseMetadata: (handle) => ({ sandboxId: handle.sandbox.sandboxId, ...(handle.ref.kind === "named" ? { reuseVia: "snapshot" } : {}) }),

    validate(config) {
      const errors = credentialsOf(config, env).missing;
      const joined = errors.length > 1 ? [`${errors.length} problems: ${errors.join("; ")}`] : errors;
      return { errors: joined };
    },

    async create({ config, labels, expiresAt, reusable, created }) {
      const account = await accountOf(config);
      // A lease kept by snapshots is a name: each resume starts a new sandbox under it.
      const name = reusable && config.reuseVia === "snapshot" ? newLeaseName() : undefined;
      const tags: Record<string, string> = { ...labels, ...(name ? { [TAGS.leaseName]: name } : {}) };
      const made = await createSandbox(account, config, { image: await imageOf(account, config), tags, expiresAt, ...(name ? { name } : {}) });
      const ref: ModalLeaseRef = name ? { kind: "named", name } : { kind: "sandbox", sandboxId: made.sandbox.sandboxId };
      created(modalLeaseIds.encode(ref));
      return handleOf(account, ref, made.sandbox, made.tags);
    },

    get: (ref) => find(ref.config, modalLeaseIds.tryDecode(ref.providerLeaseId)),

    async destroy(_ref, current) {
      const { account } = current;
      if (current.state !== "stopped") await terminate(account, current.sandbox);
      else current.sandbox.detach();
      // A lease kept by snapshots leaves no image behind.
      await deleteImage(account, current.labels[TAGS.snapshot]);
      await deleteImage(account, current.labels[TAGS.snapshotBase]);
    },

    /**
     * Keeps a lease kept by snapshots: saves the filesystem as an image, names it in the sandbox's
     * tags and ends the sandbox; the snapshot it started from goes.
     */
    async stop(handle) {
      const { account, sandbox } = handle;
      const image = await account.call("snapshotFilesystem", () => sandbox.snapshotFilesystem(), { idempotent: false });
      await account.call("setTags", () => sandbox.setTags({ ...leaseTags(handle.labels), [TAGS.expiresAt]: handle.labels[TAGS.expiresAt] ?? "0", [TAGS.snapshot]: image.imageId }), {
        idempotent: true,
      });
      await terminate(account, sandbox);
      await deleteImage(account, handle.labels[TAGS.snapshotBase]);
    },

    /** A stopped lease (kept by snapshot) gets a new sandbox from its snapshot, under the same name. */
    async start(handle, ref) {
      if (handle.ref.kind !== "named" || !handle.snapshotImageId) throw new LeaseGoneError(`modal lease ${handle.providerLeaseId} cannot be started`);
      const config = ref.config;
      const { account } = handle;
      const image = await account.call("findImage", () => account.client.images.fromId(handle.snapshotImageId!), { idempotent: true });
      const tags = { ...leaseTags(handle.labels), [TAGS.snapshotBase]: handle.snapshotImageId };
      const made = await createSandbox(account, config, { image, tags, expiresAt: null, name: handle.ref.name });
      return handleOf(account, handle.ref, made.sandbox, made.tags);
    },

    runner(handle) {
      const calls = {
        error: (operation: string, error: unknown) => modalError(operation, error, handle.account.redact),
        retry: <T>(operation: string, call: () => Promise<T>) => handle.account.call(operation, call, { idempotent: false }),
      };
      const runner = withCommandChannel(createModalRunner(handle.sandbox, calls), { lease: handle.providerLeaseId, signalsAsExitStatus: true });
      // Login terminals on Modal's PTY execs; their resizes and signals go through the runner (the channel when it is up).
      return { capabilities: Object.freeze({ ...runner.capabilities, pty: true }), run: (script, io) => runner.run(script, io), pty: modalPty(handle.sandbox, runner, calls) };
    },

    /**
     * The running sandboxes of the config's app carrying the labels, each with its lease id and
     * expiry. A lease kept by snapshot and released has no running sandbox, so it is not listed (it
     * bills nothing; its snapshot image expires with Modal's image TTL).
     */
    async list(config, labels, context) {
      const account = await accountOf(config, context.env);
      return (await sandboxesLabelled(account, config, labels)).map(({ id, sandboxId, tags }) => {
        const expires = Number(tags[TAGS.expiresAt]);
        return {
          providerLeaseId: id,
          labels: tags,
          state: "running",
          metadata: { sandboxId },
          ...(Number.isFinite(expires) && expires > 0 ? { expiresAt: new Date(expires * 1000).toISOString() } : {}),
        };
      });
    },

    async probe(config, params) {
      const base = await defaultProbe(definition, config, params);
      const findings: ProbeFinding[] = [...(base.diagnostics ?? [])];
      if (billsWhileReused(config)) {
        findings.push({
          severity: "warning",
          code: "MODAL_REUSE_BILLS_WHILE_IDLE",
          message: billingWarning(config),
          brief: "reused leases keep running and are billed while idle (Modal has no pause)",
        });
      }
      return probeResult("modal sandbox", findings);
    },

    templates: modalTemplates((config) => accountOf(config), templateImages),

    setup(context) {
      ctx = context;
    },
    shutdown() {
      accounts.closeAll();
    },
  };

  return { provider: defineSandboxProvider(definition), accounts, accountOf };
}

const { provider } = createModalPlugin();
/** For `paperclip-sandbox leases gc --provider modal`: the app's running sandboxes by their tags. */
export const listLeases = provider.listLeases;
export default provider.plugin;
