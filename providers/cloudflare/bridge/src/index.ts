import { isAuthorized } from "./auth.js";
import type { Env } from "./env.js";
import { errorResponse, json } from "./http.js";
import { route } from "./routes.js";

export { Sandbox } from "@cloudflare/sandbox";
export { LeaseRegistry } from "./registry.js";
export type { Env } from "./env.js";

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    if (!(await isAuthorized(request, env.BRIDGE_AUTH_TOKEN))) return json(401, { error: "unauthorized", message: "Missing or invalid bridge bearer token." });
    try {
      return await route(request, env, ctx);
    } catch (error) {
      return errorResponse(error);
    }
  },
} satisfies ExportedHandler<Env>;
