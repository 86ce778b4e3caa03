/**
 * Workspace realization with a repository: when the run's source is an exact GitHub URL and the
 * host has GitHub App credentials, a token for that one repository is minted and the workspace
 * directory is cloned (or fetched) with it. The token reaches git only through this command's
 * environment (a one-request `http.extraheader` via GIT_CONFIG_*): never argv, never a file, never a
 * later command. Everything this step reports is redacted of it, plain and in its Basic form.
 */
import { createSecretRedactor, shellQuote, type ScriptRunner } from "@paperclip-sandbox/kit";
import { githubAppCredentials, githubRepository, mintRepositoryToken, type GitHubRepository } from "./github-app.js";

export interface RealizationSource {
  repoUrl?: string | null;
  repoRef?: string | null;
}

export interface RealizeDeps {
  env: NodeJS.ProcessEnv;
  githubApiUrl?: string;
  fetch?: typeof globalThis.fetch;
  log?: (message: string) => void;
}

/** The source of a realization request, as the host sends it in `workspace.metadata`. */
export function sourceOf(metadata: Record<string, unknown> | undefined): RealizationSource | undefined {
  const request = metadata?.workspaceRealizationRequest as { source?: { repoUrl?: unknown; repoRef?: unknown } } | undefined;
  const source = request?.source;
  if (!source || typeof source !== "object") return undefined;
  return {
    repoUrl: typeof source.repoUrl === "string" ? source.repoUrl : null,
    repoRef: typeof source.repoRef === "string" ? source.repoRef : null,
  };
}

const REF = /^[A-Za-z0-9._/-]{1,255}$/;

function cloneScript(repository: GitHubRepository, cwd: string): string {
  const dir = shellQuote(cwd);
  return [
    "set -e",
    `if [ -d ${dir}/.git ]; then`,
    `  git -C ${dir} fetch --quiet origin`,
    "else",
    `  mkdir -p -- ${dir}`,
    `  if [ -z "$(ls -A -- ${dir})" ]; then git clone --quiet -- ${shellQuote(repository.url)} ${dir}; else echo "paperclip: ${cwd} is neither empty nor a clone; not cloning into it" >&2; fi`,
    "fi",
    `if [ -n "$PAPERCLIP_REPO_REF" ] && [ -d ${dir}/.git ]; then git -C ${dir} -c advice.detachedHead=false checkout --quiet "$PAPERCLIP_REPO_REF"; fi`,
  ].join("\n");
}

/**
 * Clones the source repository into `cwd` with a freshly minted token, when the source is a GitHub
 * repository and App credentials are there. Returns whether it did; throws (redacted) when it failed.
 */
export async function realizeRepository(runner: ScriptRunner, cwd: string, source: RealizationSource | undefined, deps: RealizeDeps, signal?: AbortSignal): Promise<boolean> {
  const repository = githubRepository(source?.repoUrl);
  if (!repository) return false;
  const credentials = githubAppCredentials(deps.env);
  if (!credentials) return false;
  const redactor = createSecretRedactor([credentials.privateKey]);
  try {
    const token = await mintRepositoryToken(credentials, repository, { apiUrl: deps.githubApiUrl, fetch: deps.fetch, signal });
    for (const secret of token.secrets) redactor.add(secret);
    const ref = source?.repoRef && REF.test(source.repoRef) && !source.repoRef.startsWith("-") ? source.repoRef : "";
    let stderr = "";
    const exit = await runner.run(cloneScript(repository, cwd), {
      env: {
        GIT_TERMINAL_PROMPT: "0",
        GIT_CONFIG_COUNT: "1",
        GIT_CONFIG_KEY_0: "http.https://github.com/.extraheader",
        GIT_CONFIG_VALUE_0: token.header,
        PAPERCLIP_REPO_REF: ref,
      },
      stdout: () => undefined,
      stderr: (chunk) => void (stderr = (stderr + chunk.toString("utf8")).slice(-4000)),
      signal,
    });
    if (exit.exitCode !== 0) throw new Error(`cloning ${repository.owner}/${repository.repo} into ${cwd} failed (exit ${exit.exitCode ?? exit.signal}): ${stderr.trim()}`);
    deps.log?.(redactor.redact(`coder: ${repository.owner}/${repository.repo} realized in ${cwd} with a repository token (expires ${token.expiresAt})`));
    return true;
  } catch (error) {
    throw new Error(redactor.redact(error instanceof Error ? error.message : String(error)));
  }
}
