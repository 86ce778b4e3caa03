// GitHub App token minting for workspace realization, against a local fake GitHub API: only for an
// exact credential-free https://github.com/owner/repo URL, restricted to that repository, used by
// the realization's git only, redacted (plain and as a Basic header) from whatever it reports.
import { createHash, createVerify, generateKeyPairSync } from "node:crypto";
import { createRouter, HttpError, runEmulator, type EmulatorDefinition, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import type { TemplateSpec } from "@paperclip-sandbox/emulator-coder";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appJwt, basicForm, githubAppCredentials, githubRepository, mintRepositoryToken } from "./github-app.js";
import { runnerEmulatorTemplate, runnerStartupScript } from "./runner-install.js";
import { startCoderEmulator, type CoderWorld } from "./__fixtures__/emulator.js";
import { harness } from "./__fixtures__/harness.js";

const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const PEM = privateKey.export({ type: "pkcs1", format: "pem" }).toString();
const TOKEN = "ghs_FakeInstallationToken0123456789abcdef";

interface TokenRequest {
  installation: string;
  jwtValid: boolean;
  claims: { iat: number; exp: number; iss: string };
  body: unknown;
}

/** GitHub's `POST /app/installations/{id}/access_tokens`, checking the App's JWT with the public key. */
function fakeGitHub(requests: TokenRequest[]): EmulatorDefinition {
  return {
    name: "fake-github",
    description: "GitHub's installation token endpoint",
    async start(kit) {
      const router = createRouter({ errorEnvelope: ({ message }) => ({ message, documentation_url: "https://docs.github.com/rest" }) });
      router.post("/app/installations/:id/access_tokens", async (ctx) => {
        const jwt = /^Bearer (.+)$/.exec(ctx.header("authorization") ?? "")?.[1] ?? "";
        const [header, payload, signature] = jwt.split(".");
        const jwtValid = createVerify("RSA-SHA256")
          .update(`${header}.${payload}`)
          .verify(publicKey, Buffer.from(signature ?? "", "base64url"));
        const claims = JSON.parse(Buffer.from(payload ?? "", "base64url").toString() || "{}");
        const body = await ctx.readJson();
        requests.push({ installation: ctx.params.id!, jwtValid, claims, body });
        if (!jwtValid) throw new HttpError(401, "A JSON web token could not be decoded");
        if (ctx.params.id !== "42") throw new HttpError(404, "Not Found");
        ctx.sendJson(201, {
          token: TOKEN,
          expires_at: "2030-01-01T00:00:00Z",
          permissions: { contents: "read" },
          repository_selection: "selected",
          repositories: [{ name: "widgets", full_name: "acme/widgets" }],
        });
      });
      const http = await kit.http(router);
      return { url: http.url.replace(/\/$/, ""), credentials: {} };
    },
  };
}

const GIT_HOME = "/home/coder/.local/bin";
/**
 * A fake git in the workspace (first on the plugin's PATH): logs its arguments and the sha256 of the
 * one-request header it got, fakes a clone, and with ~/git-fails present fails loudly, printing the header.
 */
const FAKE_GIT = [
  "#!/bin/sh",
  'log="$HOME/git.log"',
  'printf "%s\\n" "$*" >> "$log"',
  'printf "header-sha256 %s\\n" "$(printf %s "$GIT_CONFIG_VALUE_0" | sha256sum | cut -d" " -f1)" >> "$log"',
  'if [ -e "$HOME/git-fails" ]; then echo "fatal: could not read from remote with $GIT_CONFIG_VALUE_0 (token ${GIT_CONFIG_VALUE_0#*basic })" >&2; exit 128; fi',
  'if [ "$1" = clone ]; then eval "dest=\\${$#}"; mkdir -p "$dest/.git"; fi',
  "exit 0",
].join("\n");

let github: RunningEmulator;
let coder: CoderWorld;
const tokenRequests: TokenRequest[] = [];
const credentialsEnv = { GITHUB_APP_ID: "1234", GITHUB_INSTALLATION_ID: "42", GITHUB_APP_PRIVATE_KEY: PEM };

beforeAll(async () => {
  github = await runEmulator(fakeGitHub(tokenRequests));
  const runner = runnerEmulatorTemplate() as TemplateSpec;
  const installGit = `mkdir -p ${GIT_HOME} && cat > ${GIT_HOME}/git <<'EOF'\n${FAKE_GIT}\nEOF\nchmod 755 ${GIT_HOME}/git\n`;
  coder = await startCoderEmulator({ templates: [{ ...runner, agent: { ...runner.agent, startupScript: installGit + runnerStartupScript() } }] });
}, 60_000);
afterAll(async () => {
  await github?.close();
  await coder?.emu.close();
}, 60_000);

const realization = (repoUrl: string | null, repoRef: string | null = null) => ({ workspaceRealizationRequest: { version: 1, source: { kind: "project_primary", repoUrl, repoRef } } });

describe("which URLs get a token", () => {
  it("only an exact, credential-free https://github.com/<owner>/<repo>", () => {
    expect(githubRepository("https://github.com/acme/widgets")).toEqual({ owner: "acme", repo: "widgets", url: "https://github.com/acme/widgets" });
    expect(githubRepository("https://github.com/acme/widgets.git")?.repo).toBe("widgets");
    for (const url of [
      "http://github.com/acme/widgets",
      "https://user:secret@github.com/acme/widgets",
      "https://x-access-token@github.com/acme/widgets",
      "https://github.com/acme/widgets/",
      "https://github.com/acme/widgets/tree/main",
      "https://github.com/acme/widgets?ref=main",
      "https://github.com/acme/widgets#readme",
      "https://github.com:443/acme/widgets",
      "https://www.github.com/acme/widgets",
      "https://github.com.evil.example/acme/widgets",
      "https://gitlab.com/acme/widgets",
      "git@github.com:acme/widgets.git",
      "https://github.com/acme",
      "https://github.com/acme/..",
      "https://github.com/-acme/widgets",
    ]) {
      expect(githubRepository(url), url).toBeUndefined();
    }
  });
});

describe("App credentials from the worker's environment", () => {
  it("none, all three (either installation variable, key inline or in a file), or an error naming what is missing", () => {
    expect(githubAppCredentials({})).toBeUndefined();
    expect(githubAppCredentials(credentialsEnv)).toEqual({ appId: "1234", installationId: "42", privateKey: PEM });
    expect(githubAppCredentials({ GITHUB_APP_ID: "1", GITHUB_APP_INSTALLATION_ID: "2", GITHUB_APP_PRIVATE_KEY_FILE: "/keys/app.pem" }, () => PEM)?.installationId).toBe("2");
    expect(() => githubAppCredentials({ GITHUB_APP_ID: "1" })).toThrow(
      "GitHub App credentials are incomplete: set GITHUB_INSTALLATION_ID (or GITHUB_APP_INSTALLATION_ID), GITHUB_APP_PRIVATE_KEY (or GITHUB_APP_PRIVATE_KEY_FILE)",
    );
    expect(() => githubAppCredentials({ ...credentialsEnv, GITHUB_APP_PRIVATE_KEY: undefined, GITHUB_APP_PRIVATE_KEY_FILE: "/nope" })).toThrow(/GITHUB_APP_PRIVATE_KEY_FILE cannot be read/);
    expect(() => githubAppCredentials({ ...credentialsEnv, GITHUB_APP_ID: "my-app" })).toThrow(/must be numbers/);
  });

  it("signs an RS256 JWT issued a minute back, valid for at most ten minutes", () => {
    const [header, payload, signature] = appJwt({ appId: "1234", installationId: "42", privateKey: PEM }, 1_700_000_000_000).split(".");
    expect(JSON.parse(Buffer.from(header!, "base64url").toString())).toEqual({ alg: "RS256", typ: "JWT" });
    expect(JSON.parse(Buffer.from(payload!, "base64url").toString())).toEqual({ iat: 1_699_999_940, exp: 1_700_000_540, iss: "1234" });
    expect(createVerify("RSA-SHA256").update(`${header}.${payload}`).verify(publicKey, Buffer.from(signature!, "base64url"))).toBe(true);
  });
});

describe("minting", () => {
  it("asks for contents:read on the one repository, with a valid App JWT", async () => {
    const before = tokenRequests.length;
    const minted = await mintRepositoryToken({ appId: "1234", installationId: "42", privateKey: PEM }, githubRepository("https://github.com/acme/widgets")!, { apiUrl: github.url });
    expect(minted.token).toBe(TOKEN);
    expect(minted.secrets).toEqual([TOKEN, basicForm(TOKEN)]);
    expect(minted.header).toBe(`AUTHORIZATION: basic ${Buffer.from(`x-access-token:${TOKEN}`).toString("base64")}`);
    const request = tokenRequests[before]!;
    expect(request).toMatchObject({ installation: "42", jwtValid: true, body: { repositories: ["widgets"], permissions: { contents: "read" } } });
    expect(request.claims.iss).toBe("1234");
  });

  it("a refusal names GitHub's reason and carries neither the JWT nor the key", async () => {
    const error = (await mintRepositoryToken({ appId: "1234", installationId: "7", privateKey: PEM }, githubRepository("https://github.com/acme/widgets")!, { apiUrl: github.url }).catch(
      (e: Error) => e,
    )) as Error;
    expect(error.message).toMatch(/github createInstallationAccessToken failed: HTTP 404.*Not Found/);
    expect(error.message).not.toMatch(/eyJ/);
    expect(error.message).not.toContain("PRIVATE KEY");
  });
});

describe("realization", () => {
  const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

  it("clones the run's GitHub repository with a repository token that no later command sees", async () => {
    const h = harness(coder.config, { env: credentialsEnv, githubApiUrl: github.url });
    const lease = await h.acquire();
    try {
      const result = await h.realize(lease, realization("https://github.com/acme/widgets", "main"));
      expect(result.cwd).toBe("/home/coder/workspace");
      const log = (await h.sh(lease, "cat ~/git.log")).stdout.split("\n");
      expect(log[0]).toBe("clone --quiet -- https://github.com/acme/widgets /home/coder/workspace");
      expect(log[1]).toBe(`header-sha256 ${sha256(`AUTHORIZATION: basic ${basicForm(TOKEN)}`)}`);
      expect(log[2]).toBe("-C /home/coder/workspace -c advice.detachedHead=false checkout --quiet main");
      // Later commands: no token in their environment, on disk, or in the git config.
      const after = await h.sh(lease, `env; cat ~/.gitconfig .git/config 2>/dev/null; grep -rl '${TOKEN}' ~ 2>/dev/null; true`);
      expect(after.stdout).not.toContain(TOKEN);
      expect(after.stdout).not.toContain(basicForm(TOKEN));
      expect(after.stdout).not.toContain("GIT_CONFIG");
    } finally {
      await h.destroy(lease);
    }
  });

  it("redacts the token and its Basic form from a failed realization", async () => {
    const h = harness(coder.config, { env: credentialsEnv, githubApiUrl: github.url });
    const lease = await h.acquire();
    try {
      await h.sh(lease, "touch ~/git-fails");
      const error = (await h.realize(lease, realization("https://github.com/acme/widgets")).catch((e: Error) => e)) as Error;
      expect(error).toBeInstanceOf(Error);
      expect(error.message).toMatch(/cloning acme\/widgets into \/home\/coder\/workspace failed \(exit 128\): fatal: could not read from remote/);
      expect(error.message).not.toContain(TOKEN);
      expect(error.message).not.toContain(basicForm(TOKEN));
    } finally {
      await h.destroy(lease);
    }
  });

  it("mints nothing for another URL, or without App credentials", async () => {
    const before = tokenRequests.length;
    const withCreds = harness(coder.config, { env: credentialsEnv, githubApiUrl: github.url });
    const lease = await withCreds.acquire();
    try {
      for (const url of ["https://gitlab.com/acme/widgets", "https://user:pw@github.com/acme/widgets", null]) await withCreds.realize(lease, realization(url));
      const noCreds = harness(coder.config, { env: {}, githubApiUrl: github.url });
      await noCreds.realize(lease, realization("https://github.com/acme/widgets"));
      expect(tokenRequests.length).toBe(before);
      expect((await withCreds.sh(lease, "cat ~/git.log 2>/dev/null; true")).stdout).toBe("");
    } finally {
      await withCreds.destroy(lease);
    }
  });
});
