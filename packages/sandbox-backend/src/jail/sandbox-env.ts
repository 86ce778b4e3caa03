/**
 * The environment every command in the jail starts from. Built from scratch (never from the worker's
 * environment, which may hold the host's API keys), with the effective egress grant visible to the
 * sandboxed code and the proxy variables set only when a grant opens the proxy.
 */
import { egressEnv, type EgressGrant } from "@paperclip-sandbox/kit";
import { SANDBOX_PATHS, SANDBOX_USER } from "./argv.js";

/** Port of the supervisor's loopback forwarder to the host egress proxy, inside the jail. */
export const EGRESS_PROXY_PORT = 3128;

export function grantIsEmpty(grant: EgressGrant): boolean {
  return grant.allowFqdns.length === 0 && grant.allowCidrs.length === 0;
}

export function sandboxBaseEnv(
  grant: EgressGrant,
  searchPath: string,
  user: { name: string; uid: number; home: string } = { name: SANDBOX_USER, uid: 1000, home: SANDBOX_PATHS.home },
): Record<string, string> {
  const name = user.uid === 0 ? "root" : user.name;
  const env: Record<string, string> = {
    PATH: searchPath,
    HOME: user.home,
    USER: name,
    LOGNAME: name,
    SHELL: "/bin/sh",
    TMPDIR: SANDBOX_PATHS.tmp,
    LANG: "C.UTF-8",
    XDG_CACHE_HOME: `${user.home}/.cache`,
    ...egressEnv(grant, grantIsEmpty(grant) ? "deny-all" : "allow-list-proxy"),
  };
  if (!grantIsEmpty(grant)) {
    const proxy = `http://127.0.0.1:${EGRESS_PROXY_PORT}`;
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]) {
      env[name] = proxy;
      env[name.toLowerCase()] = proxy;
    }
    // The host's in-sandbox bridge listens on the jail's loopback: it must never go through the proxy.
    env.NO_PROXY = "localhost,127.0.0.1,::1";
    env.no_proxy = env.NO_PROXY;
  }
  return env;
}
