/**
 * GitHub App credentials on the host (the worker's environment), turned into a short-lived
 * installation token restricted to one repository (contents: read) for an exact, credential-free
 * `https://github.com/<owner>/<repo>` URL. The token is used only while a workspace is realized and
 * is redacted everywhere, plain and in its `Authorization: Basic` form.
 */
import { createSign } from "node:crypto";
import { readFileSync } from "node:fs";
import { createVendorClient } from "@paperclip-sandbox/kit";

const GITHUB_API_URL = "https://api.github.com";

export interface GitHubAppCredentials {
  appId: string;
  installationId: string;
  privateKey: string;
}

export interface GitHubRepository {
  owner: string;
  repo: string;
  /** The URL as given (what git clones). */
  url: string;
}

export interface RepositoryToken {
  token: string;
  expiresAt: string;
  /** Every form the token may take in output: plain, and base64 of `x-access-token:<token>` (a Basic header). */
  secrets: string[];
  /** The git config value that authenticates one request (`http.<url>.extraheader`). */
  header: string;
}

class GitHubAppError extends Error {
  override name = "GitHubAppError";
}

const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const REPO = /^[A-Za-z0-9._-]{1,100}$/;

/** The repository of an exact `https://github.com/<owner>/<repo>` (optionally `.git`) URL; undefined for anything else. */
export function githubRepository(url: string | null | undefined): GitHubRepository | undefined {
  if (!url) return undefined;
  const match = /^https:\/\/github\.com\/([^/?#@:]+)\/([^/?#@:]+?)(\.git)?$/.exec(url);
  if (!match) return undefined;
  const [, owner, repo] = match;
  if (!OWNER.test(owner!) || !REPO.test(repo!) || repo === "." || repo === "..") return undefined;
  return { owner: owner!, repo: repo!, url };
}

/**
 * The App's credentials: `GITHUB_APP_ID`, `GITHUB_INSTALLATION_ID` (or `GITHUB_APP_INSTALLATION_ID`),
 * `GITHUB_APP_PRIVATE_KEY` (or `GITHUB_APP_PRIVATE_KEY_FILE`). None set: undefined; some: an error
 * naming what is missing.
 */
export function githubAppCredentials(env: NodeJS.ProcessEnv, readFile: (path: string) => string = (path) => readFileSync(path, "utf8")): GitHubAppCredentials | undefined {
  const appId = env.GITHUB_APP_ID?.trim();
  const installationId = (env.GITHUB_INSTALLATION_ID ?? env.GITHUB_APP_INSTALLATION_ID)?.trim();
  let privateKey = env.GITHUB_APP_PRIVATE_KEY;
  const keyFile = env.GITHUB_APP_PRIVATE_KEY_FILE;
  if (!appId && !installationId && !privateKey && !keyFile) return undefined;
  if (!privateKey && keyFile) {
    try {
      privateKey = readFile(keyFile);
    } catch (error) {
      throw new GitHubAppError(`GITHUB_APP_PRIVATE_KEY_FILE cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
  }
  const missing = [
    ...(appId ? [] : ["GITHUB_APP_ID"]),
    ...(installationId ? [] : ["GITHUB_INSTALLATION_ID (or GITHUB_APP_INSTALLATION_ID)"]),
    ...(privateKey ? [] : ["GITHUB_APP_PRIVATE_KEY (or GITHUB_APP_PRIVATE_KEY_FILE)"]),
  ];
  if (missing.length > 0) throw new GitHubAppError(`GitHub App credentials are incomplete: set ${missing.join(", ")}`);
  if (!/^\d+$/.test(appId!) || !/^\d+$/.test(installationId!)) throw new GitHubAppError("GITHUB_APP_ID and the installation id must be numbers");
  return { appId: appId!, installationId: installationId!, privateKey: privateKey!.replace(/\\n/g, "\n") };
}

const base64url = (value: Buffer | string) => Buffer.from(value).toString("base64url");

/** The App's JWT (RS256, issued a minute in the past against clock drift, valid for 9 minutes). */
export function appJwt(credentials: GitHubAppCredentials, now = Date.now()): string {
  const issuedAt = Math.floor(now / 1000) - 60;
  const header = base64url(JSON.stringify({ alg: "RS256", typ: "JWT" }));
  const payload = base64url(JSON.stringify({ iat: issuedAt, exp: issuedAt + 600, iss: credentials.appId }));
  let signature: Buffer;
  try {
    signature = createSign("RSA-SHA256").update(`${header}.${payload}`).sign(credentials.privateKey);
  } catch {
    throw new GitHubAppError("GITHUB_APP_PRIVATE_KEY is not a usable RSA private key (PEM)");
  }
  return `${header}.${payload}.${base64url(signature)}`;
}

/** The Basic value git sends for a token: base64 of `x-access-token:<token>`. */
export function basicForm(token: string): string {
  return Buffer.from(`x-access-token:${token}`).toString("base64");
}

/** Mints an installation token for one repository, read-only. */
export async function mintRepositoryToken(
  credentials: GitHubAppCredentials,
  repository: GitHubRepository,
  options: { apiUrl?: string; fetch?: typeof globalThis.fetch; signal?: AbortSignal; now?: number } = {},
): Promise<RepositoryToken> {
  const jwt = appJwt(credentials, options.now);
  const client = createVendorClient({
    vendor: "github",
    baseUrl: options.apiUrl ?? GITHUB_API_URL,
    headers: { authorization: `Bearer ${jwt}`, accept: "application/vnd.github+json", "x-github-api-version": "2022-11-28" },
    retry: { attempts: 2 },
    fetch: options.fetch,
  });
  const answer = await client.json<{ token?: unknown; expires_at?: unknown; repositories?: Array<{ name?: unknown; full_name?: unknown }> }>({
    operation: "createInstallationAccessToken",
    method: "POST",
    path: ["app", "installations", credentials.installationId, "access_tokens"],
    json: { repositories: [repository.repo], permissions: { contents: "read" } },
    idempotent: true,
    signal: options.signal,
  });
  if (typeof answer.token !== "string" || answer.token.length < 8) throw new GitHubAppError("GitHub answered the token request without a token");
  const scoped = answer.repositories;
  if (Array.isArray(scoped) && !scoped.every((entry) => String(entry.full_name ?? `${repository.owner}/${entry.name}`).toLowerCase() === `${repository.owner}/${repository.repo}`.toLowerCase())) {
    throw new GitHubAppError("GitHub returned a token for other repositories than the one asked for; not using it");
  }
  const token = answer.token;
  const basic = basicForm(token);
  return { token, expiresAt: String(answer.expires_at ?? ""), secrets: [token, basic], header: `AUTHORIZATION: basic ${basic}` };
}
