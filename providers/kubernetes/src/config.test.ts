// The kubeconfig is checked at validation, before anything contacts a cluster: a careless operator's
// kubeconfig (malformed, no current context, an auth client-node cannot use, a token over plain http)
// is refused there, naming the field and never repeating its content.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acquire, scope, startPlugin, type Hooks } from "./__fixtures__/cluster.js";

const TOKEN = "k8s-bearer-s3cr3t";

function kubeconfig(options: { server?: string; user?: Record<string, unknown>; currentContext?: string | null; insecure?: boolean } = {}): string {
  const cluster: Record<string, unknown> = { server: options.server ?? "https://127.0.0.1:6443" };
  if (options.insecure) cluster["insecure-skip-tls-verify"] = true;
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster }],
    users: [{ name: "u", user: options.user ?? { token: TOKEN } }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
    ...(options.currentContext === null ? {} : { "current-context": options.currentContext ?? "ctx" }),
  });
}

let hooks: Hooks;
beforeAll(async () => {
  hooks = (await startPlugin()).hooks;
});

async function errorsOf(config: Record<string, unknown>): Promise<string[]> {
  const result = await hooks.onEnvironmentValidateConfig({ driverKey: "kubernetes", config });
  return result.errors ?? [];
}

describe("kubernetes validates the kubeconfig itself", () => {
  it("accepts a well-formed kubeconfig over https, and over http to loopback", async () => {
    expect(await errorsOf({ kubeconfig: kubeconfig() })).toEqual([]);
    expect(await errorsOf({ kubeconfig: kubeconfig({ server: "http://127.0.0.1:8080" }) })).toEqual([]);
    expect(await errorsOf({ kubeconfig: kubeconfig({ server: "http://localhost:8080" }) })).toEqual([]);
    expect(await errorsOf({ kubeconfigSecretRef: kubeconfig({ user: { "client-certificate-data": "Y2VydA==", "client-key-data": "a2V5" } }) })).toEqual([]);
  });

  it("refuses malformed YAML without quoting it", async () => {
    const [error] = await errorsOf({ kubeconfig: `apiVersion: v1\nusers:\n  - name: u\n   user: {token: ${TOKEN}` });
    expect(error).toMatch(/^Kubeconfig: not a readable kubeconfig \(/);
    expect(error).not.toContain(TOKEN);
  });

  it("refuses a kubeconfig without a current context, or whose context names no cluster or user", async () => {
    expect(await errorsOf({ kubeconfig: kubeconfig({ currentContext: null }) })).toEqual(["Kubeconfig: no current context (current-context must name one of its contexts)"]);
    expect(await errorsOf({ kubeconfig: kubeconfig({ currentContext: "elsewhere" }) })).toEqual(["Kubeconfig: no current context (current-context must name one of its contexts)"]);
    const noUser = JSON.parse(kubeconfig()) as { users: unknown[] };
    noUser.users = [];
    expect(await errorsOf({ kubeconfig: JSON.stringify(noUser) })).toEqual(["Kubeconfig: the current context names no user of its users"]);
  });

  it("refuses an auth client-node cannot use: an unknown auth-provider, or no credentials at all", async () => {
    expect(await errorsOf({ kubeconfig: kubeconfig({ user: { "auth-provider": { name: "keystone", config: {} } } }) })).toEqual([
      'Kubeconfig: the user\'s auth-provider "keystone" is not supported (use a token, a client certificate, exec, or auth-provider oidc, azure or gcp)',
    ]);
    expect(await errorsOf({ kubeconfig: kubeconfig({ user: {} }) })).toEqual([
      "Kubeconfig: the current context's user has no credentials client-node can use (a token, a client certificate, username and password, exec or auth-provider)",
    ]);
  });

  describe("a bearer token over plain http to a non-loopback server (insecure-skip-tls-verify)", () => {
    // The attack's server: it records any Authorization header it is sent. It listens on loopback, and
    // the kubeconfig names it as ::ffff:127.0.0.1, an address that is not a loopback name.
    const seen: string[] = [];
    let server: http.Server;
    let config: Record<string, unknown>;
    beforeAll(async () => {
      server = http.createServer((req, res) => {
        seen.push(String(req.headers.authorization ?? "none"));
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ major: "1", minor: "30", gitVersion: "v1.30.0" }));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const port = (server.address() as AddressInfo).port;
      config = { kubeconfig: kubeconfig({ server: `http://[::ffff:127.0.0.1]:${port}`, insecure: true }) };
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it("is refused at validation", async () => {
      expect(await errorsOf(config)).toEqual([
        expect.stringMatching(/^Kubeconfig: the cluster's server http:\/\/\[::ffff:7f00:1\]:\d+ is plain http: its credentials would travel in clear text; use https/),
      ]);
    });

    it("and the probe sends nothing", async () => {
      const outcome = await hooks.onEnvironmentProbe({ ...scope, config } as never).then(
        (result) => JSON.stringify(result),
        (error: Error) => error.message,
      );
      expect(outcome).toMatch(/plain http: its credentials would travel in clear text/);
      expect(outcome).not.toContain(TOKEN);
      expect(seen).toEqual([]);
    });
  });
});

describe("no credentials at all", () => {
  // The host's form creates an environment through validation; a worker that later runs in a pod
  // uses its service account, so only probe and acquire can say the credentials are missing.
  const none = { egressAllowFqdns: ["api.github.com"] };

  it("passes validation, so the host's form can save it", async () => {
    expect(await errorsOf(none)).toEqual([]);
  });

  it("the probe names what to set, contacting nothing", async () => {
    const result = await hooks.onEnvironmentProbe({ ...scope, config: none } as never);
    expect(result).toMatchObject({ ok: false });
    expect(result.summary).toMatch(/^Kubernetes: Configuration: Credentials: none set: set Kubeconfig, Kubeconfig secret or In-cluster credentials/);
  });

  it("acquire refuses it with the same words", async () => {
    await expect(acquire(hooks, none)).rejects.toThrow(/Credentials: none set: set Kubeconfig/);
  });
});
