/** boxd's gRPC endpoint (the SDKs' default) and its token exchange. */
export const DEFAULT_API_URL = "https://boxd.sh:9443";
export const DEFAULT_EXCHANGE_URL = "https://app.boxd.sh/api/v1/auth/token";

export interface GrpcEndpoint {
  /** `host:port` for grpc-js (the scheme stripped). */
  target: string;
  /** TLS (`https://`, or a bare non-loopback `host:port`) or plaintext h2c. */
  tls: boolean;
  host: string;
}

const LOOPBACK = /^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\]|::1)$/i;

function isLoopbackHost(host: string): boolean {
  return LOOPBACK.test(host);
}

/**
 * The SDKs' base-URL rules: `https://` → TLS, `http://` → plaintext, a bare `host:port` → TLS
 * unless the host is loopback (localhost, 127.*). The scheme is stripped before dialing; a path is
 * refused (gRPC paths are fixed). Plaintext to anything but loopback is refused here too: the
 * bearer token would cross the network in clear text.
 */
export function parseApiUrl(raw: string): GrpcEndpoint {
  const text = raw.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== "http" && scheme !== "https") throw new TypeError(`must be https://host:port, http://host:port (loopback only) or host:port (got scheme ${scheme})`);
  let url: URL;
  try {
    url = new URL(scheme ? text : `boxd://${text}`);
  } catch {
    throw new TypeError("must be https://host:port, http://host:port (loopback only) or host:port");
  }
  if (url.username || url.password) throw new TypeError("must not contain credentials (user:password@)");
  if (url.pathname !== "/" && url.pathname !== "") throw new TypeError("must not have a path (boxd's gRPC paths are fixed)");
  if (url.search || url.hash) throw new TypeError("must not have a query or fragment");
  const host = url.hostname;
  if (!host) throw new TypeError("must name a host");
  const loopback = isLoopbackHost(host);
  const tls = scheme === "https" || (scheme === undefined && !loopback);
  if (!tls && !loopback) throw new TypeError("must use https (plaintext is allowed only for localhost, 127.0.0.0/8 and ::1)");
  const port = url.port || (tls ? "443" : "80");
  return { target: `${host}:${port}`, tls, host };
}

/** The exchange URL: https, or http on loopback. */
export function checkExchangeUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError("must be an absolute URL");
  }
  if (url.username || url.password) throw new TypeError("must not contain credentials (user:password@)");
  if (url.protocol === "https:") return url;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return url;
  throw new TypeError("must use https (http is allowed only for localhost, 127.0.0.0/8 and ::1)");
}
