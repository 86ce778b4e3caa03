import { GrpcError, GrpcStatus, type GrpcCall, type GrpcHandler } from "@paperclip-sandbox/emulator-kit";
import { getLogsV1, stdinWriteV1 } from "./entrypoint-stdio.js";
import { ids } from "./ids.js";
import { legacyFilesHandlers } from "./legacy-files.js";
import type { ImageNames } from "./image-names.js";
import type { ImageStore } from "./images.js";
import { checkTags, type SandboxDefinition, type SandboxManager, type SandboxRecord } from "./sandboxes.js";
import type { TokenIssuer } from "./tokens.js";
import { OBJECT_CREATION, result, seconds, STATUS, tagsToWire, type WireTag } from "./wire.js";

interface SecretSource {
  secret_id?: string;
  env?: { contents: Record<string, string> } | null;
  source?: string;
}

export interface AppRecord {
  id: string;
  name: string;
  environment: string;
}

export interface ControlPlaneDeps {
  /** The account's apps by id (shared with the sandbox manager, which checks a create's app). */
  apps: Map<string, AppRecord>;
  sandboxes: SandboxManager;
  images: ImageStore;
  /** Named (published) images, per environment. */
  imageNames: ImageNames;
  issuer: TokenIssuer;
  tokenId: string;
  authTokenTtlSeconds: number;
  routerTokenTtlSeconds: number;
  /** `https://127.0.0.1:<port>`: the SDK dials it without TLS because the server URL is loopback. */
  routerUrl(): string;
}

const tunnelsOf = (record: SandboxRecord) => (record.state === "finished" ? { result: record.result, tunnels: [] } : { tunnels: [] });

/** Longest a SandboxWait long-polls, whatever the client asks (seconds). */
const MAX_WAIT_SECS = 55;
const PAGE_SIZE = 100;

function sleepUntil(finished: Promise<void>, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
    void finished.then(done);
  });
}

/** The handlers of modal.client.ModalClient. */
export function controlPlaneHandlers(deps: ControlPlaneDeps): Record<string, GrpcHandler> {
  const apps = deps.apps;
  const appsByName = new Map<string, string>();
  const secrets = new Map<string, Record<string, string>>();
  const environments = new Map<string, string>();
  const { sandboxes, images } = deps;

  const appKey = (environment: string, name: string) => `${environment}\u0000${name}`;
  const routerAccess = (record: SandboxRecord) => ({ jwt: deps.issuer.issue("router", record.taskId, deps.routerTokenTtlSeconds), url: deps.routerUrl() });
  const metadata = (record: SandboxRecord) => ({ app_id: record.appId, ...(record.result ? { result: record.result } : {}) });

  const envOf = (sources: readonly SecretSource[], secretIds: readonly string[]): Record<string, string> => {
    const env: Record<string, string> = {};
    for (const id of secretIds) Object.assign(env, lookupSecret(id));
    for (const source of sources) {
      if (source.secret_id) Object.assign(env, lookupSecret(source.secret_id));
      else if (source.env) Object.assign(env, source.env.contents);
    }
    return env;
  };
  const lookupSecret = (id: string) => {
    const found = secrets.get(id);
    if (!found) throw new GrpcError(GrpcStatus.NOT_FOUND, `Secret ${id} not found`);
    return found;
  };

  const createSandbox = (version: 1 | 2, request: { app_id: string; definition: SandboxDefinition | null; tags: WireTag[]; secret_sources?: SecretSource[] }, call: GrpcCall) => {
    if (!request.definition) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "definition is required");
    const key = call.metadata.get("x-idempotency-key")[0];
    return sandboxes.create({
      version,
      appId: request.app_id,
      definition: request.definition,
      tags: request.tags,
      env: envOf(request.secret_sources ?? [], request.definition.secret_ids),
      idempotencyKey: typeof key === "string" ? `${version}:${key}` : undefined,
    });
  };

  const taskIdOf = (record: SandboxRecord) => (record.state === "running" ? { task_id: record.taskId } : { task_result: record.result ?? result(STATUS.TERMINATED) });

  const terminate = async ({ sandbox_id }: { sandbox_id: string }) => {
    const record = sandboxes.get(sandbox_id);
    if (record.state === "finished") return { existing_result: record.result };
    await sandboxes.terminate(record);
    return {};
  };

  const wait = async ({ sandbox_id, timeout }: { sandbox_id: string; timeout: number }, call: GrpcCall) => {
    const record = sandboxes.get(sandbox_id);
    if (record.state === "running" && timeout > 0) await sleepUntil(record.finished, Math.min(timeout, MAX_WAIT_SECS) * 1000, call.signal);
    return record.state === "finished" ? { result: record.result, metadata: metadata(record) } : { metadata: metadata(record) };
  };

  const list = (request: { app_id: string; before_timestamp: number; environment_name: string; include_finished: boolean; tags: WireTag[] }) => {
    const wanted = checkTags(request.tags);
    const matches = sandboxes
      .all()
      .filter((s) => (request.include_finished || s.state === "running") && (!request.app_id || s.appId === request.app_id))
      .filter((s) => [...wanted].every(([name, value]) => s.tags.get(name) === value))
      .filter((s) => !request.before_timestamp || seconds(s.createdAt) < request.before_timestamp)
      .sort((a, b) => b.createdAt - a.createdAt)
      .slice(0, PAGE_SIZE);
    return {
      sandboxes: matches.map((s) => ({
        id: s.id,
        created_at: seconds(s.createdAt),
        task_info: { id: s.taskId, started_at: seconds(s.createdAt), sandbox_id: s.id, ...(s.finishedAt ? { finished_at: seconds(s.finishedAt), result: s.result } : {}) },
        app_id: s.appId,
        tags: tagsToWire(s.tags),
        name: s.name ?? "",
        image_id: s.imageId,
        timeout_secs: s.timeoutSecs,
        ...(s.idleTimeoutSecs ? { idle_timeout_secs: s.idleTimeoutSecs } : {}),
      })),
    };
  };

  const tagsSet = ({ sandbox_id, tags }: { sandbox_id: string; tags: WireTag[] }) => {
    const record = sandboxes.get(sandbox_id);
    record.tags = checkTags(tags);
    return {};
  };
  const tagsGet = ({ sandbox_id }: { sandbox_id: string }) => ({ tags: tagsToWire(sandboxes.get(sandbox_id).tags) });

  const fromName = ({ sandbox_name, environment_name, app_name, include_terminated }: { sandbox_name: string; environment_name: string; app_name: string; include_terminated: boolean }) => {
    const appId = appsByName.get(appKey(environment_name, app_name));
    const candidates = sandboxes
      .all()
      .filter((s) => s.appId === appId && s.name === sandbox_name)
      .sort((a, b) => b.createdAt - a.createdAt);
    const found = candidates.find((s) => s.state === "running") ?? (include_terminated ? candidates[0] : undefined);
    if (!found) throw new GrpcError(GrpcStatus.NOT_FOUND, `Sandbox with name '${sandbox_name}' not found in App '${app_name}'`);
    return { sandbox_id: found.id, metadata: metadata(found) };
  };

  return {
    AuthTokenGet: () => ({ token: deps.issuer.issue("auth", deps.tokenId, deps.authTokenTtlSeconds) }),

    AppGetOrCreate({ app_name, environment_name, object_creation_type }: { app_name: string; environment_name: string; object_creation_type: number }) {
      if (!app_name) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "app_name is required");
      const key = appKey(environment_name, app_name);
      const known = appsByName.get(key);
      if (known && object_creation_type !== OBJECT_CREATION.EPHEMERAL) return { app_id: known };
      if (object_creation_type === OBJECT_CREATION.UNSPECIFIED) throw new GrpcError(GrpcStatus.NOT_FOUND, `App '${app_name}' not found`);
      const app: AppRecord = { id: ids.app(), name: app_name, environment: environment_name };
      apps.set(app.id, app);
      if (object_creation_type !== OBJECT_CREATION.EPHEMERAL) appsByName.set(key, app.id);
      return { app_id: app.id };
    },

    EnvironmentGetOrCreate({ deployment_name }: { deployment_name: string }) {
      const name = deployment_name || "main";
      let id = environments.get(name);
      if (!id) environments.set(name, (id = ids.environment()));
      return { environment_id: id, metadata: { name, settings: { image_builder_version: "2024.10", webhook_suffix: "modal.run" } } };
    },

    ImageGetOrCreate({ image, app_id }: { image: { dockerfile_commands: string[]; base_images: Array<{ image_id: string }> } | null; app_id: string }) {
      if (!apps.has(app_id)) throw new GrpcError(GrpcStatus.NOT_FOUND, `App ${app_id} not found`);
      const commands = image?.dockerfile_commands ?? [];
      const from = /^FROM\s+(\S+)$/.exec(commands[0] ?? "");
      if (from && commands.length === 1) {
        if (from[1] === "base") {
          // An image on top of another one with no further layers is that image.
          const base = images.get(image?.base_images[0]?.image_id ?? "");
          if (!base) throw new GrpcError(GrpcStatus.NOT_FOUND, "base image not found");
          return { image_id: base.id, result: result(STATUS.SUCCESS) };
        }
        return { image_id: images.fromRegistry(from[1]!).id, result: result(STATUS.SUCCESS) };
      }
      return {
        image_id: ids.image(),
        result: result(STATUS.FAILURE, 1, "emulator limit: only registry images (a single FROM <tag>) are supported; RUN and other layers are not built"),
      };
    },

    ImageFromId({ image_id }: { image_id: string }) {
      if (!images.get(image_id)) throw new GrpcError(GrpcStatus.NOT_FOUND, `Could not find image with ID ${image_id}`);
      return { image_id };
    },

    async ImageDelete({ image_id }: { image_id: string }) {
      await images.delete(image_id);
      return {};
    },

    ImagePublish: ({ image_id, tag, environment_name }: { image_id: string; tag: string; environment_name: string }) => deps.imageNames.publish(image_id, tag, environment_name),
    ImageGetByTag: ({ tag, environment_name }: { tag: string; environment_name: string }) => deps.imageNames.getByTag(tag, environment_name),
    ImageNameDelete({ tag }: { tag: string }) {
      deps.imageNames.delete(tag);
      return {};
    },

    SecretGetOrCreate({ deployment_name, object_creation_type, env_dict }: { deployment_name: string; object_creation_type: number; env_dict: Record<string, string> }) {
      if (object_creation_type !== OBJECT_CREATION.EPHEMERAL) {
        throw new GrpcError(GrpcStatus.NOT_FOUND, `Secret '${deployment_name}' not found (emulator limit: only ephemeral secrets exist)`);
      }
      const id = ids.secret();
      secrets.set(id, { ...env_dict });
      return { secret_id: id };
    },

    async SandboxCreate(request: { app_id: string; definition: SandboxDefinition | null; tags: WireTag[] }, call: GrpcCall) {
      const record = await createSandbox(1, request, call);
      return { sandbox_id: record.id, metadata: metadata(record) };
    },

    async SandboxCreateV2(request: { app_id: string; definition: SandboxDefinition | null; tags: WireTag[]; secret_sources: SecretSource[] }, call: GrpcCall) {
      const record = await createSandbox(2, request, call);
      return { sandbox_id: record.id, task_id: record.taskId, metadata: metadata(record), command_router_access: routerAccess(record) };
    },

    SandboxGetTaskId: ({ sandbox_id }: { sandbox_id: string }) => taskIdOf(sandboxes.get(sandbox_id)),
    SandboxGetTaskIdV2: ({ sandbox_id }: { sandbox_id: string }) => taskIdOf(sandboxes.get(sandbox_id)),

    SandboxGetCommandRouterAccess({ sandbox_id, task_id }: { sandbox_id?: string; task_id?: string }) {
      const record = sandbox_id ? sandboxes.get(sandbox_id) : sandboxes.all().find((s) => s.taskId === task_id);
      if (!record || record.state !== "running") throw new GrpcError(GrpcStatus.NOT_FOUND, "the Sandbox is not running");
      return { ...routerAccess(record), worker_ipv4_address: "127.0.0.1" };
    },
    TaskGetCommandRouterAccess({ task_id }: { task_id: string }) {
      const record = sandboxes.all().find((s) => s.taskId === task_id);
      if (!record || record.state !== "running") throw new GrpcError(GrpcStatus.NOT_FOUND, `Task ${task_id} is not running`);
      return routerAccess(record);
    },

    SandboxTerminate: terminate,
    SandboxTerminateV2: terminate,
    SandboxWait: wait,
    SandboxWaitV2: wait,
    SandboxList: list,
    SandboxListV2: list,
    SandboxTagsSet: tagsSet,
    SandboxTagsSetV2: tagsSet,
    SandboxTagsGet: tagsGet,
    SandboxTagsGetV2: tagsGet,
    SandboxGetFromName: fromName,
    SandboxGetFromNameV2: fromName,

    ...legacyFilesHandlers({ sandboxes }),

    async SandboxGetLogs(request: { sandbox_id: string; file_descriptor: number; timeout: number; last_entry_id: string }, call: GrpcCall) {
      await getLogsV1(sandboxes.get(request.sandbox_id), request, call);
    },
    async SandboxStdinWrite(request: { sandbox_id: string; input: Buffer; index: number; eof: boolean }) {
      const record = sandboxes.get(request.sandbox_id);
      if (record.state !== "running") throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, `Sandbox ${record.id} has finished`);
      await stdinWriteV1(record, request);
      return {};
    },
    // No readiness probes here: a running sandbox is ready from its creation.
    SandboxWaitUntilReady({ sandbox_id }: { sandbox_id: string }) {
      const record = sandboxes.get(sandbox_id);
      if (record.state !== "running") throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, `Sandbox ${sandbox_id} has finished`);
      return { ready_at: seconds(record.createdAt) };
    },
    // The jails expose no port, so a sandbox has no tunnels (as one created without encrypted ports).
    SandboxGetTunnels: ({ sandbox_id }: { sandbox_id: string }) => tunnelsOf(sandboxes.get(sandbox_id)),
    SandboxGetTunnelsV2: ({ sandbox_id }: { sandbox_id: string }) => tunnelsOf(sandboxes.get(sandbox_id)),
    SandboxSetName({ sandbox_id, name }: { sandbox_id: string; name: string }) {
      const record = sandboxes.get(sandbox_id);
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "sandbox names are 1 to 64 of A-Z a-z 0-9 . _ -");
      if (sandboxes.running().some((s) => s !== record && s.appId === record.appId && s.name === name)) {
        throw new GrpcError(GrpcStatus.ALREADY_EXISTS, `a running Sandbox named '${name}' already exists in this App`);
      }
      record.name = name;
      return {};
    },
    SecretDelete({ secret_id }: { secret_id: string }) {
      if (!secrets.delete(secret_id)) throw new GrpcError(GrpcStatus.NOT_FOUND, `Secret ${secret_id} not found`);
      return {};
    },
    // Images are built at once (ImageGetOrCreate answers SUCCESS): joining one only reports that.
    ImageJoinStreaming({ image_id }: { image_id: string }, call: GrpcCall) {
      if (!images.get(image_id)) throw new GrpcError(GrpcStatus.NOT_FOUND, `Could not find image with ID ${image_id}`);
      call.write({ result: result(STATUS.SUCCESS), task_logs: [], entry_id: "", eof: true });
    },
  };
}
