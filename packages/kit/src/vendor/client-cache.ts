import { createHash } from "node:crypto";

/** Clients kept for the worker's life, one per credential (no module-level state: the plugin owns the cache). */
export interface ClientCache<C, Client> {
  /** The client for this config, made on first use. */
  get(config: C): Client;
  /** The clients made so far (to close them at shutdown). */
  values(): Client[];
  /** Forgets every client (after closing them); the next `get` makes a new one. */
  clear(): void;
}

/**
 * One client per credential: `keyOf` names what makes two configs share a client (endpoint, key,
 * environment), hashed so no credential is kept as a map key. A client that is a promise and
 * rejects is forgotten, so the next call tries again.
 */
export function createClientCache<C, Client>(keyOf: (config: C) => unknown, make: (config: C) => Client): ClientCache<C, Client> {
  const clients = new Map<string, Client>();
  return {
    get(config) {
      const key = createHash("sha256")
        .update(JSON.stringify(keyOf(config)))
        .digest("hex");
      const known = clients.get(key);
      if (known !== undefined) return known;
      const client = make(config);
      clients.set(key, client);
      if (client instanceof Promise) {
        client.catch(() => {
          if (clients.get(key) === client) clients.delete(key);
        });
      }
      return client;
    },
    values: () => [...clients.values()],
    clear: () => clients.clear(),
  };
}
