import { compilePattern, type PathPattern } from "./pattern.js";
import type { HttpContext } from "./context.js";
import type { ErrorEnvelope } from "./errors.js";
import type { WebSocketRoute } from "./websocket.js";

/** A handler answers through `ctx`; a returned value (not `undefined`) is sent as 200 JSON. */
export type HttpHandler = (ctx: HttpContext) => unknown | Promise<unknown>;

export interface RouteOptions {
  /** This route's error body (a Connect route answers Connect errors, say); else the router's. */
  errorEnvelope?: ErrorEnvelope;
  /** Cap for the buffered body readers (default: the router's). */
  bodyLimit?: number;
}

export interface HttpRoute {
  readonly method: string;
  readonly pattern: PathPattern;
  readonly handler: HttpHandler;
  readonly options: RouteOptions;
}

type RouteMatch<R> = { route: R; params: Record<string, string> };

export interface RouterOptions {
  /** The vendor's JSON error body (default {@link defaultErrorEnvelope}). */
  errorEnvelope?: ErrorEnvelope;
  /** Default cap for buffered bodies (default 1 MiB). */
  bodyLimit?: number;
  /**
   * The answer to a request no route matches (default 404 "no route for …" in `errorEnvelope`): a
   * vendor whose unknown paths answer otherwise (another body, another envelope per path prefix,
   * gin's plain-text 404) says so here. Also used for a known path with another method when set.
   */
  notFound?: (method: string, path: string) => RawAnswer;
}

/** A fixed answer: a string body goes out as is (text/plain unless told), anything else as JSON. */
export interface RawAnswer {
  status: number;
  body: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface Router {
  readonly options: Readonly<RouterOptions>;
  /** Registers a route; `method` `*` accepts any. First registered match wins. */
  route(method: string, pattern: string, handler: HttpHandler, options?: RouteOptions): Router;
  get(pattern: string, handler: HttpHandler, options?: RouteOptions): Router;
  post(pattern: string, handler: HttpHandler, options?: RouteOptions): Router;
  put(pattern: string, handler: HttpHandler, options?: RouteOptions): Router;
  patch(pattern: string, handler: HttpHandler, options?: RouteOptions): Router;
  delete(pattern: string, handler: HttpHandler, options?: RouteOptions): Router;
  /** Registers a WebSocket endpoint (HTTP/1.1 upgrade). */
  ws(pattern: string, route: Omit<WebSocketRoute, "pattern">): Router;
  /** The route for a request; `allowed` lists the methods when only the method is wrong. */
  match(method: string, path: string): RouteMatch<HttpRoute> | { allowed: string[] } | undefined;
  matchWebSocket(path: string): RouteMatch<WebSocketRoute> | undefined;
  /** Every registered route, `METHOD pattern`, for listings and the CLI. */
  describe(): string[];
}

export function createRouter(options: RouterOptions = {}): Router {
  const routes: HttpRoute[] = [];
  const sockets: WebSocketRoute[] = [];

  const router: Router = {
    options,
    route(method, pattern, handler, routeOptions = {}) {
      routes.push({ method: method.toUpperCase(), pattern: compilePattern(pattern), handler, options: routeOptions });
      return router;
    },
    get: (pattern, handler, routeOptions) => router.route("GET", pattern, handler, routeOptions),
    post: (pattern, handler, routeOptions) => router.route("POST", pattern, handler, routeOptions),
    put: (pattern, handler, routeOptions) => router.route("PUT", pattern, handler, routeOptions),
    patch: (pattern, handler, routeOptions) => router.route("PATCH", pattern, handler, routeOptions),
    delete: (pattern, handler, routeOptions) => router.route("DELETE", pattern, handler, routeOptions),
    ws(pattern, route) {
      sockets.push({ ...route, pattern: compilePattern(pattern) });
      return router;
    },
    match(method, path) {
      const upper = method.toUpperCase();
      const allowed: string[] = [];
      for (const route of routes) {
        const params = route.pattern.match(path);
        if (!params) continue;
        if (route.method === "*" || route.method === upper) return { route, params };
        allowed.push(route.method);
      }
      return allowed.length > 0 ? { allowed: [...new Set(allowed)] } : undefined;
    },
    matchWebSocket(path) {
      for (const route of sockets) {
        const params = route.pattern.match(path);
        if (params) return { route, params };
      }
      return undefined;
    },
    describe: () => [...routes.map((route) => `${route.method} ${route.pattern.source}`), ...sockets.map((route) => `WS ${route.pattern.source}`)],
  };
  return router;
}
