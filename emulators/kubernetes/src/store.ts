import { randomUUID } from "node:crypto";
import { typeKey, type ResourceType } from "./resources.js";
import { alreadyExists, conflict, notFound } from "./status.js";
import type { KubeObject } from "./validation.js";

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoreEvent {
  type: WatchEventType;
  resourceType: ResourceType;
  object: KubeObject;
  resourceVersion: number;
}

export type StoreListener = (event: StoreEvent) => void;

const HISTORY = 2_000;

/** Every object the emulated cluster holds, with resource versions, uids and a watch feed. */
export class ObjectStore {
  #rv = 1;
  readonly #objects = new Map<string, Map<string, KubeObject>>();
  readonly #listeners = new Set<StoreListener>();
  readonly #history: StoreEvent[] = [];
  readonly now: () => number;

  constructor(now: () => number) {
    this.now = now;
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  #bucket(type: ResourceType): Map<string, KubeObject> {
    const key = typeKey(type);
    let bucket = this.#objects.get(key);
    if (!bucket) this.#objects.set(key, (bucket = new Map()));
    return bucket;
  }

  #emit(type: WatchEventType, resourceType: ResourceType, object: KubeObject): void {
    const event = { type, resourceType, object: structuredClone(object), resourceVersion: Number(object.metadata?.resourceVersion ?? this.#rv) };
    this.#history.push(event);
    if (this.#history.length > HISTORY) this.#history.shift();
    for (const listener of [...this.#listeners]) {
      try {
        listener(event);
      } catch (error) {
        process.stderr.write(`kubernetes emulator: a watcher failed: ${(error as Error).stack ?? error}\n`);
      }
    }
  }

  /** Events after `resourceVersion`, or undefined when they are no longer kept (410 Gone). */
  since(resourceVersion: number): StoreEvent[] | undefined {
    const first = this.#history[0];
    if (first && first.resourceVersion > resourceVersion + 1 && this.#history.length >= HISTORY) return undefined;
    return this.#history.filter((e) => e.resourceVersion > resourceVersion);
  }

  subscribe(listener: StoreListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get(type: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const found = this.#bucket(type).get(`${namespace ?? ""}/${name}`);
    return found ? structuredClone(found) : undefined;
  }

  mustGet(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const found = this.get(type, namespace, name);
    if (!found) throw notFound(type.resource, name, type.group);
    return found;
  }

  list(type: ResourceType, namespace?: string): KubeObject[] {
    return [...this.#bucket(type).values()].filter((o) => namespace === undefined || o.metadata?.namespace === namespace).map((o) => structuredClone(o));
  }

  /** Every object of every type (for owner-reference lookups). */
  all(): Array<{ type: ResourceType; object: KubeObject }> {
    const out: Array<{ type: ResourceType; object: KubeObject }> = [];
    for (const bucket of this.#objects.values()) for (const object of bucket.values()) out.push({ type: (object as any)[TYPE] as ResourceType, object: structuredClone(object) });
    return out;
  }

  create(type: ResourceType, namespace: string | undefined, input: KubeObject): KubeObject {
    const bucket = this.#bucket(type);
    const meta = { ...(input.metadata ?? {}) };
    if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${randomSuffix()}`;
    const key = `${namespace ?? ""}/${meta.name}`;
    if (bucket.has(key)) throw alreadyExists(type.resource, meta.name, type.group);
    this.#rv += 1;
    const object: KubeObject = {
      ...input,
      metadata: {
        ...meta,
        ...(namespace ? { namespace } : {}),
        uid: randomUUID(),
        resourceVersion: String(this.#rv),
        generation: 1,
        creationTimestamp: new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, "Z"),
      },
    };
    delete object.metadata!.deletionTimestamp;
    Object.defineProperty(object, TYPE, { value: type, enumerable: false });
    bucket.set(key, object);
    this.#emit("ADDED", type, object);
    return structuredClone(object);
  }

  /** Applies `change` to the stored object; `expectVersion` enforces optimistic concurrency (409). */
  update(type: ResourceType, namespace: string | undefined, name: string, change: (current: KubeObject) => KubeObject, expectVersion?: string): KubeObject {
    const bucket = this.#bucket(type);
    const key = `${namespace ?? ""}/${name}`;
    const current = bucket.get(key);
    if (!current) throw notFound(type.resource, name, type.group);
    if (expectVersion && expectVersion !== current.metadata?.resourceVersion) {
      throw conflict(type.resource, name, type.group, "the object has been modified; please apply your changes to the latest version and try again");
    }
    const next = change(structuredClone(current));
    const specChanged = JSON.stringify(next.spec) !== JSON.stringify(current.spec);
    this.#rv += 1;
    next.metadata = {
      ...next.metadata,
      name: current.metadata!.name,
      ...(namespace ? { namespace } : {}),
      uid: current.metadata!.uid,
      creationTimestamp: current.metadata!.creationTimestamp,
      resourceVersion: String(this.#rv),
      generation: (current.metadata!.generation ?? 1) + (specChanged ? 1 : 0),
      ...(current.metadata!.deletionTimestamp ? { deletionTimestamp: current.metadata!.deletionTimestamp } : {}),
    };
    Object.defineProperty(next, TYPE, { value: type, enumerable: false });
    bucket.set(key, next);
    this.#emit("MODIFIED", type, next);
    return structuredClone(next);
  }

  /** Removes the object for good (after finalizers); emits DELETED. */
  remove(type: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const bucket = this.#bucket(type);
    const key = `${namespace ?? ""}/${name}`;
    const current = bucket.get(key);
    if (!current) return undefined;
    bucket.delete(key);
    this.#rv += 1;
    const gone = { ...current, metadata: { ...current.metadata, resourceVersion: String(this.#rv) } };
    this.#emit("DELETED", type, gone);
    return structuredClone(gone);
  }

  /** Marks an object as being deleted (kept while finalizers remain). */
  markDeleting(type: ResourceType, namespace: string | undefined, name: string, finalizer?: string): KubeObject {
    return this.update(type, namespace, name, (obj) => {
      obj.metadata!.deletionTimestamp ??= new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, "Z");
      obj.metadata!.deletionGracePeriodSeconds ??= 0;
      if (finalizer && !(obj.metadata!.finalizers ?? []).includes(finalizer)) obj.metadata!.finalizers = [...(obj.metadata!.finalizers ?? []), finalizer];
      // deletionTimestamp is kept by update() only when already set: set it on the result too.
      return obj;
    });
  }
}

const TYPE = Symbol("resourceType");

export function randomSuffix(length = 5): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789";
  let out = "";
  for (let i = 0; i < length; i++) out += alphabet[Math.floor(Math.random() * alphabet.length)];
  return out;
}
