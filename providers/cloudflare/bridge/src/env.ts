import type { Sandbox } from "@cloudflare/sandbox";
import type { LeaseRegistry } from "./registry.js";

export interface Env {
  Sandbox: DurableObjectNamespace<Sandbox>;
  LeaseRegistry: DurableObjectNamespace<LeaseRegistry>;
  /** The bearer token every request must carry (`wrangler secret put BRIDGE_AUTH_TOKEN`). */
  BRIDGE_AUTH_TOKEN?: string;
  /** Interval of the `: keepalive` SSE comment (default 15000 ms). */
  KEEPALIVE_INTERVAL_MS?: string;
}
