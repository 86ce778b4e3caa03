#!/usr/bin/env node
// The e2e's local npm registry: verdaccio on loopback, holding our release tarballs and the
// third-party packages they need, so the real host installs our providers by package name.
//
//   registry.mjs install                         verdaccio (pinned by registry/package-lock.json) in the
//                                                e2e cache; prints VERDACCIO=<bin>
//   registry.mjs prepare <releaseDir> <regDir>   lays out <regDir>: storage (third-party packages from the
//                                                seed cache, seeding it on a miss), config.yaml (no uplinks),
//                                                upgrade/ (each provider repacked as its next version)
//   registry.mjs publish <registryUrl> <releaseDir> <regDir>
//                                                publishes the release (dist-tag latest), then the upgrade
//                                                versions (dist-tag e2e-upgrade)
//   registry.mjs cli <registryUrl> <workDir>     the CLI by name from the registry: npm install -g, npx
//
// The registry never proxies our scope. Third-party packages come from a seed made once per set of
// dependency specs: a verdaccio that proxies the public registry for everything but our scope,
// filled by installing each public package by name through it; the e2e's own verdaccio has no
// uplink at all, so nothing reaches the internet during the run.
//
// Env: PAPERCLIP_E2E_CACHE (default /var/cache/paperclip-sandbox-e2e), E2E_NPM_UPSTREAM (seeding
// only; default: the registry root's npm is configured with, `npm config get registry`).
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const CACHE = process.env.PAPERCLIP_E2E_CACHE || "/var/cache/paperclip-sandbox-e2e";
const SCOPE = "@paperclip-sandbox";
/** Bump when the seed's layout or the way it is filled changes: older seeds are then rebuilt. */
const SEED_FORMAT = 1;
export const UPGRADE_TAG = "e2e-upgrade";

const log = (msg) => process.stderr.write(`[registry] ${msg}\n`);
const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));
const sha = (text) => createHash("sha256").update(text).digest("hex");

/** The version the upgrade scenario installs over `version`: the next patch, as a prerelease. */
export function upgradeVersionOf(version) {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!m) throw new Error(`not a semver version: ${version}`);
  return `${m[1]}.${m[2]}.${Number(m[3]) + 1}-e2e.1`;
}

/** The environment for npm children: ours without what an enclosing `npm run` set. */
function npmEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}
/**
 * @param {string[]} args
 * @param {{ cwd?: string, env?: Record<string, string>, timeoutMs?: number }} [options]
 */
async function npm(args, { cwd, env = {}, timeoutMs = 300_000 } = {}) {
  try {
    const { stdout } = await run("npm", args, { cwd, env: npmEnv(env), timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    throw new Error(
      `npm ${args.join(" ")} failed: ${String(err.stderr ?? err.message)
        .trim()
        .split("\n")
        .slice(-12)
        .join("\n")}`,
    );
  }
}
/** A user npmrc for talking to `url` only (publishing needs some token; verdaccio accepts any here). */
function writeNpmrc(file, url, extra = []) {
  const hostPath = url.replace(/^https?:/, "");
  fs.writeFileSync(file, [`registry=${url}`, `${hostPath}:_authToken=e2e-local`, "update-notifier=false", "fund=false", "audit=false", ...extra, ""].join("\n"));
}

// ---------------------------------------------------------------- verdaccio install
export async function installVerdaccio() {
  const lock = fs.readFileSync(path.join(HERE, "registry", "package-lock.json"), "utf8");
  const dir = path.join(CACHE, `verdaccio-${sha(lock).slice(0, 16)}`);
  const bin = path.join(dir, "node_modules", "verdaccio", "bin", "verdaccio");
  if (fs.existsSync(path.join(dir, ".complete"))) return bin;
  const t0 = Date.now();
  fs.mkdirSync(CACHE, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(CACHE, ".tmp-verdaccio-"));
  try {
    for (const f of ["package.json", "package-lock.json"]) fs.copyFileSync(path.join(HERE, "registry", f), path.join(tmp, f));
    await npm(["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: tmp, timeoutMs: 600_000 });
    await run("chmod", ["-R", "o+rX", tmp]);
    fs.writeFileSync(path.join(tmp, ".complete"), "");
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  fs.chmodSync(CACHE, 0o755);
  log(`installed verdaccio into ${dir} in ${Date.now() - t0} ms`);
  return bin;
}

// ---------------------------------------------------------------- config
/**
 * verdaccio's config: our scope is local only (never proxied); everything else is served from the
 * `thirdparty` storage, proxied to `upstream` only when one is given (seeding).
 */
function verdaccioConfig({ storage, port, upstream, logFile }) {
  return [
    `storage: ${JSON.stringify(storage)}`,
    "auth:",
    "  htpasswd:",
    `    file: ${JSON.stringify(path.join(storage, "htpasswd"))}`,
    "    max_users: -1",
    ...(upstream ? ["uplinks:", "  upstream:", `    url: ${JSON.stringify(upstream)}`, "    timeout: 60s", "    max_fails: 5"] : []),
    "packages:",
    `  '${SCOPE}/*':`,
    "    access: $all",
    "    publish: $all",
    "    unpublish: $all",
    "    storage: ours",
    "  '**':",
    "    access: $all",
    "    publish: $authenticated",
    "    storage: thirdparty",
    ...(upstream ? ["    proxy: upstream"] : []),
    "web:",
    "  enable: false",
    "max_body_size: 200mb",
    `listen: 127.0.0.1:${port}`,
    `log: { type: file, path: ${JSON.stringify(logFile)}, format: json, level: warn }`,
    "",
  ].join("\n");
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = /** @type {import("node:net").AddressInfo} */ (srv.address());
      srv.close(() => resolve(port));
    });
  });
}

export async function waitForRegistry(url, pid, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}-/ping`, { signal: AbortSignal.timeout(2000) });
      if (res.ok) return;
    } catch {
      /* not up yet */
    }
    if (pid) {
      try {
        process.kill(pid, 0);
      } catch {
        throw new Error(`verdaccio (pid ${pid}) exited before it answered`);
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`verdaccio at ${url} did not answer within ${timeoutMs} ms`);
}

// ---------------------------------------------------------------- release contents
function releaseIndex(releaseDir) {
  return readJson(path.join(releaseDir, "release.json")).packages;
}
/** package.json of a release tarball. */
async function tarballManifest(tgz) {
  const { stdout } = await run("tar", ["-xzOf", tgz, "package/package.json"], { maxBuffer: 8 * 1024 * 1024 });
  return JSON.parse(stdout);
}

async function seedKey(releaseDir) {
  const parts = [`format ${SEED_FORMAT}`, fs.readFileSync(path.join(HERE, "registry", "package-lock.json"), "utf8")];
  for (const p of releaseIndex(releaseDir)) {
    const m = await tarballManifest(path.join(releaseDir, p.file));
    const deps = Object.entries({ ...m.dependencies, ...m.optionalDependencies })
      .filter(([name]) => !name.startsWith(`${SCOPE}/`))
      .sort();
    parts.push(`${p.name} ${JSON.stringify(deps)}`);
  }
  return sha(parts.join("\n")).slice(0, 16);
}

// ---------------------------------------------------------------- running verdaccio (seeding)
async function withVerdaccio({ bin, storage, upstream }, fn) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const configFile = path.join(storage, "..", "config.yaml");
  fs.writeFileSync(configFile, verdaccioConfig({ storage, port, upstream, logFile: path.join(storage, "..", "verdaccio.log") }));
  const child = spawn(process.execPath, [bin, "--config", configFile], { stdio: ["ignore", "ignore", "pipe"], detached: false });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const stop = () => {
    try {
      child.kill("SIGTERM");
    } catch {
      /* gone */
    }
  };
  process.once("exit", stop);
  try {
    await waitForRegistry(url, child.pid).catch((err) => {
      throw new Error(`${err.message}\n${stderr}`);
    });
    return await fn(url);
  } finally {
    stop();
    await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
    process.removeListener("exit", stop);
  }
}

/**
 * The seed for this release's dependency specs: storage/thirdparty filled through a proxying
 * verdaccio by installing each public package by name (separately, as the host and an operator
 * would). Cached under the e2e cache; older seeds are removed.
 */
export async function ensureSeed(releaseDir) {
  const bin = await installVerdaccio();
  const key = await seedKey(releaseDir);
  const dir = path.join(CACHE, `registry-seed-${key}`);
  if (fs.existsSync(path.join(dir, ".complete"))) {
    log(`seed cache hit: ${dir}`);
    return dir;
  }
  const t0 = Date.now();
  const tmp = fs.mkdtempSync(path.join(CACHE, ".tmp-seed-"));
  try {
    const storage = path.join(tmp, "storage");
    fs.mkdirSync(storage, { recursive: true });
    const upstream = process.env.E2E_NPM_UPSTREAM || (await npm(["config", "get", "registry"], { cwd: tmp })).trim();
    await withVerdaccio({ bin, storage, upstream }, async (url) => {
      const npmrc = path.join(tmp, "npmrc");
      writeNpmrc(npmrc, url);
      await publishAll(url, releaseDir, null, npmrc);
      // A fresh npm cache: every tarball goes through verdaccio, so verdaccio keeps a copy.
      for (const p of releaseIndex(releaseDir)) {
        const work = path.join(tmp, "install", p.name.replace("/", "+"));
        fs.mkdirSync(work, { recursive: true });
        fs.writeFileSync(path.join(work, "package.json"), '{"name":"seed","private":true}\n');
        await npm(["install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error", "--userconfig", npmrc, "--cache", path.join(tmp, "npm-cache"), p.name], { cwd: work });
      }
    });
    // Only the third-party packages are kept: ours are published fresh by every run.
    fs.rmSync(path.join(storage, "ours"), { recursive: true, force: true });
    for (const f of fs.readdirSync(storage)) if (f !== "thirdparty") fs.rmSync(path.join(storage, f), { recursive: true, force: true });
    for (const f of fs.readdirSync(tmp)) if (f !== "storage") fs.rmSync(path.join(tmp, f), { recursive: true, force: true });
    fs.writeFileSync(path.join(tmp, ".complete"), "");
    for (const old of fs.readdirSync(CACHE)) if (old.startsWith("registry-seed-")) fs.rmSync(path.join(CACHE, old), { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const count = fs.readdirSync(path.join(dir, "storage", "thirdparty")).length;
  log(`seeded ${dir} (${count} third-party entries) through the upstream registry in ${Date.now() - t0} ms`);
  return dir;
}

// ---------------------------------------------------------------- prepare (run layout)
/**
 * <regDir>/storage (a copy of the seed), <regDir>/config.yaml (no uplinks, a free loopback port),
 * <regDir>/upgrade/*.tgz (each provider repacked at its upgrade version). Prints REGISTRY_PORT=, REGISTRY_URL=, REGISTRY_CONFIG=.
 */
export async function prepare(releaseDir, regDir) {
  const seed = await ensureSeed(releaseDir);
  fs.mkdirSync(path.join(regDir, "storage"), { recursive: true });
  fs.cpSync(path.join(seed, "storage", "thirdparty"), path.join(regDir, "storage", "thirdparty"), { recursive: true });
  const trimmed = trimToStoredVersions(path.join(regDir, "storage", "thirdparty"));
  log(`third-party metadata trimmed to the stored tarballs: ${trimmed} versions dropped`);
  const port = await freePort();
  const configFile = path.join(regDir, "config.yaml");
  fs.writeFileSync(configFile, verdaccioConfig({ storage: path.join(regDir, "storage"), port, upstream: null, logFile: path.join(regDir, "verdaccio.log") }));
  const upgradeDir = path.join(regDir, "upgrade");
  fs.mkdirSync(upgradeDir, { recursive: true });
  for (const p of releaseIndex(releaseDir).filter((x) => x.dir.startsWith("providers/"))) {
    await repackAtVersion(path.join(releaseDir, p.file), upgradeVersionOf(p.version), upgradeDir);
  }
  return { port, url: `http://127.0.0.1:${port}/`, configFile };
}

/**
 * The seed keeps each package's whole metadata but only the tarballs installs fetched. With no
 * uplink, a version listed without its tarball is a 500 that npm retries for 70 s (npm under Node
 * 24 re-resolved undici to such a version on the host's `npm uninstall`), so each packument is cut
 * down to its stored versions and its dist-tags to those. Returns how many versions were dropped.
 */
function trimToStoredVersions(thirdparty) {
  let dropped = 0;
  const dirs = fs
    .readdirSync(thirdparty)
    .flatMap((name) => (name.startsWith("@") ? fs.readdirSync(path.join(thirdparty, name)).map((sub) => path.join(thirdparty, name, sub)) : [path.join(thirdparty, name)]));
  for (const dir of dirs) {
    const file = path.join(dir, "package.json");
    if (!fs.existsSync(file)) continue;
    const doc = JSON.parse(fs.readFileSync(file, "utf8"));
    const tarballs = new Set(fs.readdirSync(dir).filter((f) => f.endsWith(".tgz")));
    const stored = Object.keys(doc.versions ?? {}).filter((v) => tarballs.has(path.basename(new URL(doc.versions[v].dist?.tarball ?? "x:/none").pathname)));
    const before = Object.keys(doc.versions ?? {}).length;
    if (stored.length === before) continue;
    dropped += before - stored.length;
    doc.versions = Object.fromEntries(stored.map((v) => [v, doc.versions[v]]));
    const newest = [...stored].sort(compareVersions).at(-1);
    doc["dist-tags"] = Object.fromEntries(Object.entries(doc["dist-tags"] ?? {}).filter(([, v]) => stored.includes(v)));
    if (newest && !doc["dist-tags"].latest) doc["dist-tags"].latest = newest;
    if (doc.time) doc.time = Object.fromEntries(Object.entries(doc.time).filter(([k]) => k === "created" || k === "modified" || stored.includes(k)));
    fs.writeFileSync(file, JSON.stringify(doc));
  }
  return dropped;
}

/** Semver order for release versions (prereleases before their release; enough for picking `latest`). */
function compareVersions(a, b) {
  const [ca, pa = ""] = a.split("-", 2);
  const [cb, pb = ""] = b.split("-", 2);
  const na = ca.split(".").map(Number);
  const nb = cb.split(".").map(Number);
  for (let i = 0; i < 3; i += 1) if ((na[i] ?? 0) !== (nb[i] ?? 0)) return (na[i] ?? 0) - (nb[i] ?? 0);
  if (pa === pb) return 0;
  if (!pa) return 1;
  if (!pb) return -1;
  return pa < pb ? -1 : 1;
}

/** The tarball as its next version (same contents, package.json version changed), into `outDir`. */
async function repackAtVersion(tgz, version, outDir) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "e2e-repack-"));
  try {
    await run("tar", ["-xzf", tgz, "-C", work]);
    const file = path.join(work, "package", "package.json");
    const m = readJson(file);
    m.version = version;
    fs.writeFileSync(file, `${JSON.stringify(m, null, 2)}\n`);
    await npm(["pack", "--ignore-scripts", "--loglevel=error", "--pack-destination", outDir], { cwd: path.join(work, "package") });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- publish
async function publishOne(url, tgz, tag, npmrc) {
  await npm(["publish", tgz, "--registry", url, "--userconfig", npmrc, "--tag", tag, "--ignore-scripts", "--loglevel=error", "--access", "public"], { cwd: path.dirname(tgz) });
}

/** The release in dependency order (latest), then the upgrade tarballs in `upgradeDir` (e2e-upgrade). */
export async function publishAll(url, releaseDir, upgradeDir, npmrc) {
  const packages = releaseIndex(releaseDir);
  const t0 = Date.now();
  // verdaccio does not resolve dependencies on publish, so the order only matters to a reader of
  // the registry mid-way; four at a time.
  const queue = packages.map((p) => path.join(releaseDir, p.file));
  const upgrades = upgradeDir
    ? fs
        .readdirSync(upgradeDir)
        .filter((f) => f.endsWith(".tgz"))
        .sort()
        .map((f) => path.join(upgradeDir, f))
    : [];
  const work = async (list, tag) => {
    const next = [...list];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let f = next.shift(); f; f = next.shift()) await publishOne(url, f, tag, npmrc);
      }),
    );
  };
  await work(queue, "latest");
  await work(upgrades, UPGRADE_TAG);
  return { count: queue.length + upgrades.length, ms: Date.now() - t0 };
}

// ---------------------------------------------------------------- the CLI by name
/**
 * What an operator types: `npm install -g @paperclip-sandbox/cli @paperclip-sandbox/plugin-bubblewrap`
 * (into a prefix under `workDir`) and `npx @paperclip-sandbox/cli --help`, from the registry. Install
 * scripts are off (better-sqlite3 would compile from source: no prebuilt binary can be fetched here),
 * so only commands that never open the lease database run: --help, version, validate.
 */
export async function checkCli(url, workDir) {
  const t0 = Date.now();
  fs.mkdirSync(workDir, { recursive: true });
  const npmrc = path.join(workDir, "npmrc");
  writeNpmrc(npmrc, url, ["ignore-scripts=true"]);
  const env = { HOME: workDir, npm_config_userconfig: npmrc, npm_config_cache: path.join(workDir, "npm-cache") };
  const prefix = path.join(workDir, "global");
  await npm(["install", "-g", "--prefix", prefix, "--loglevel=error", `${SCOPE}/cli`, `${SCOPE}/plugin-bubblewrap`], { cwd: workDir, env });
  const bin = path.join(prefix, "bin", "paperclip-sandbox");
  const cli = async (args) => (await run(bin, args, { cwd: workDir, env: npmEnv(env), timeout: 120_000 })).stdout;
  const help = await cli(["--help"]);
  if (!help.startsWith("paperclip-sandbox: ")) throw new Error(`unexpected --help output: ${help.slice(0, 200)}`);
  const version = (await cli(["version"])).trim();
  // The globally installed bubblewrap provider, found beside the CLI by its driver key.
  const validated = JSON.parse(await cli(["validate", "--provider", "bubblewrap", "--json"]));
  if (validated.ok !== true || validated.driverKey !== "bubblewrap") throw new Error(`validate --provider bubblewrap: ${JSON.stringify(validated).slice(0, 300)}`);
  const npxDir = path.join(workDir, "npx");
  fs.mkdirSync(npxDir, { recursive: true });
  const npxHelp = await run("npx", ["--yes", `${SCOPE}/cli`, "--help"], { cwd: npxDir, env: npmEnv(env), timeout: 300_000, maxBuffer: 16 * 1024 * 1024 });
  if (!npxHelp.stdout.startsWith("paperclip-sandbox: ")) throw new Error(`unexpected npx --help output: ${npxHelp.stdout.slice(0, 200)}`);
  return { version, ms: Date.now() - t0 };
}

// ---------------------------------------------------------------- command line
/** @param {string[]} argv */
async function main([command, ...args]) {
  if (command === "install") {
    console.log(`VERDACCIO=${await installVerdaccio()}`);
  } else if (command === "prepare") {
    const [releaseDir, regDir] = args;
    const { port, url, configFile } = await prepare(path.resolve(releaseDir), path.resolve(regDir));
    console.log(`REGISTRY_PORT=${port}\nREGISTRY_URL=${url}\nREGISTRY_CONFIG=${configFile}`);
  } else if (command === "publish") {
    const [url, releaseDir, regDir] = args;
    const npmrc = path.join(regDir, "publisher.npmrc");
    writeNpmrc(npmrc, url);
    const { count, ms } = await publishAll(url, path.resolve(releaseDir), path.join(regDir, "upgrade"), npmrc);
    log(`published ${count} tarballs to ${url} in ${ms} ms`);
  } else if (command === "cli") {
    const [url, workDir] = args;
    const r = await checkCli(url, path.resolve(workDir));
    log(`CLI by name from ${url}: npm install -g, --help, ${r.version}, validate --provider bubblewrap ok, npx --help; ${r.ms} ms`);
  } else {
    console.error("usage: registry.mjs install | prepare <releaseDir> <regDir> | publish <url> <releaseDir> <regDir> | cli <url> <workDir>");
    process.exit(2);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(`[registry] ${err.message}`);
    process.exit(1);
  });
}
