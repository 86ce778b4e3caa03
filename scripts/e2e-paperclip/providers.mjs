// The locally runnable providers the e2e drives through the real host. To add one, append an entry:
//   driverKey       the manifest driver key (environment config.provider)
//   dir             package dir relative to the repo root (built: paperclipPlugin.{manifest,worker})
//   config(ctx)     the environment config for the task runs (ctx.runDir is a scratch dir the server user owns)
//   invalidConfig   a config validateConfig must refuse, and a regex the host's 4xx error must match
//   missingBackend  a config whose backend is absent: probe-config must fail with a diagnostic matching the regex
//   reuse           run the reuseLease scenario (second run on the same issue resumes the same lease)
//   timingRuns      extra trivial runs whose assignment -> lease-release median is reported
//   targetMs        optional median target for timingRuns (a miss is reported, it does not fail the run)
//   duplex          { runs }: also run tasks with the host's experimental duplex (HTTP/2) callback bridge on
//   leaseDir(ctx, lease)  host dir a lease lives in (checked gone after release), or null
//   prepare(ctx)    optional: create what the config needs before the scenario (runs as root; the server is nobody)
//   leftovers(ctx)  extra provider-specific leftovers to report after the runs (strings), e.g. state-dir entries
//   emulator        hosted providers: { start(ctx) -> handle } (emulator-kit's startEmulator shape: url,
//                   credentials, close()); started before the provider's scenarios, stopped after, and
//                   available to config(ctx)/prepare(ctx)/leftovers(ctx) as ctx.emulator
//   ui(ctx)         the browser test of the host's Add environment form (ui.mjs): fields are named by their
//                   titles; fill/choose (title -> value), cleared (titles typed in and cleared), badItems
//                   ([{ list, value }]), goodItems (list -> value), probeFill, probe (RegExp the Test summary
//                   must match), saved(config) -> problems with the saved config. Every provider gets one.
import fs from "node:fs";
import path from "node:path";

/** Whether the server's user (nobody) could create cgroups here: if not, bubblewrap's probe must warn. */
function cgroupsWritableByNobody() {
  const parent = fs.existsSync("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
  try {
    const st = fs.statSync(parent);
    return st.uid === 65534 || (st.mode & 0o002) !== 0;
  } catch {
    return false;
  }
}
const expectEqual = (what, actual, expected) =>
  JSON.stringify(actual) === JSON.stringify(expected) ? [] : [`${what} is ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`];

const listDirs = (dir) => {
  try {
    return fs.readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch {
    return [];
  }
};

export const PROVIDERS = [
  {
    driverKey: "fake-plugin",
    dir: "providers/fake-plugin",
    config: () => ({}),
    // (timeoutMs: -5 would be refused by the host's own envelope schema before the plugin sees it)
    invalidConfig: { config: { acquireDelayMs: 700_000 }, error: /Acquire delay \(ms\): must be at most 600000/ },
    missingBackend: { config: { probeFailure: "e2e: fake backend is missing", acquireFailure: "e2e: fake backend is missing" }, diagnostic: /fake backend is missing/ },
    reuse: false,
    timingRuns: 0,
    duplex: { runs: 1 },
    // The provider keeps lease dirs under the worker's os.tmpdir() (the worker env has no TMPDIR).
    leaseDir: (_ctx, lease) => (lease.providerLeaseId ? path.join("/tmp/paperclip-fake-plugin-65534", lease.providerLeaseId) : null),
    leftovers: () => [],
    ui: () => ({
      cleared: ["Image (recorded only)", "Probe failure"],
      probe: /^fake-plugin sandbox ready — NO isolation: commands run on the worker's host as its user$/,
      saved: (config) => [...expectEqual("image", config.image, "fake:latest"), ...expectEqual("probeFailure", config.probeFailure, undefined)],
    }),
  },
  {
    driverKey: "bubblewrap",
    dir: "providers/bubblewrap",
    // <stateDir>/leases/<leaseId>/ per lease (see packages/sandbox-backend/src/store/lease-store.ts). Keep the path short:
    // the supervisor socket path inside it must fit in sockaddr_un (107 bytes).
    config: (ctx) => ({ stateDir: path.join(ctx.runDir, "bwrap") }),
    prepare: (ctx) => {
      fs.mkdirSync(path.join(ctx.runDir, "bwrap"), { recursive: true, mode: 0o700 });
      fs.chownSync(path.join(ctx.runDir, "bwrap"), 65534, 65534);
    },
    invalidConfig: { config: { cpu: -1 }, error: /CPU limit \(cores\): must be greater than 0/ },
    missingBackend: { config: { rootfs: "/nonexistent/paperclip-e2e-rootfs" }, diagnostic: /rootfs|nonexistent/i },
    reuse: true,
    timingRuns: 5,
    targetMs: 3000,
    duplex: { runs: 3 },
    leaseDir: (ctx, lease) => (lease.providerLeaseId ? path.join(ctx.runDir, "bwrap", "leases", lease.providerLeaseId) : null),
    leftovers: (ctx) => listDirs(path.join(ctx.runDir, "bwrap", "leases")).map((name) => `lease dir bwrap/leases/${name}`),
    ui: (ctx) => ({
      fill: { "State directory": path.join(ctx.runDir, "bwrap") },
      choose: { "Runner lifecycle (Paperclip setting)": "warm" },
      cleared: ["Root filesystem"],
      badItems: [
        { list: "Allowed host names", value: "not a host!" },
        { list: "Allowed IP ranges", value: "10.0.0.0/99" },
      ],
      goodItems: { "Allowed host names": "api.github.com", "Allowed IP ranges": "10.0.0.0/8" },
      probeFill: { "Memory limit (MiB)": 512, "Disk limit (MiB)": 1024 },
      // The server runs as nobody: unless nobody may create cgroups, the memory limit is not enforced.
      probe: cgroupsWritableByNobody()
        ? /^bubblewrap sandbox ready — disk limit NOT enforced: diskMb 1024 MiB \(no filesystem quota\)$/
        : /^bubblewrap sandbox ready — limits NOT enforced: memoryMb \(the worker cannot create cgroups\); disk limit NOT enforced: diskMb 1024 MiB \(no filesystem quota\)$/,
      saved: (config) => [
        ...expectEqual("rootfs", config.rootfs, undefined),
        ...expectEqual("egressAllowFqdns", config.egressAllowFqdns, ["api.github.com"]),
        ...expectEqual("egressAllowCidrs", config.egressAllowCidrs, ["10.0.0.0/8"]),
        ...expectEqual("memoryMb", config.memoryMb, 512),
        ...expectEqual("diskMb", config.diskMb, 1024),
        ...expectEqual("runnerLifecycleMode", config.runnerLifecycleMode, "warm"),
        ...expectEqual("stateDir", config.stateDir, path.join(ctx.runDir, "bwrap")),
      ],
    }),
  },
];

// Hosted E2B-family providers run against the envd emulator (E2B's control plane + envd on one
// loopback origin, sandboxes are sandbox-backend jails owned by root); its built dist is imported here.
async function startEnvdEmulator() {
  const { runEmulator } = await import(new URL("../../packages/emulator-kit/dist/index.js", import.meta.url).href);
  const { emulator } = await import(new URL("../../emulators/envd/dist/index.js", import.meta.url).href);
  return runEmulator(emulator);
}
/** The emulator's jail directories still there (a destroyed sandbox leaves none). */
const envdLeftovers = (ctx) => (ctx.emulator ? listDirs(path.join(ctx.emulator.env.ENVD_EMULATOR_STATE_DIR, "leases")).map((id) => `emulated sandbox ${id}`) : []);

PROVIDERS.push({
  driverKey: "e2b",
  dir: "providers/e2b",
  emulator: { start: startEnvdEmulator },
  config: (ctx) => ({ apiKey: ctx.emulator.credentials.apiKey, apiUrl: ctx.emulator.url, sandboxUrl: ctx.emulator.url }),
  invalidConfig: { config: { timeoutMs: 10 }, error: /Sandbox timeout \(ms\): must be at least 1000/ },
  missingBackend: { config: { template: "paperclip-e2e-missing" }, diagnostic: /template 'paperclip-e2e-missing' not found/ },
  reuse: true,
  timingRuns: 3,
  duplex: { runs: 1 },
  leaseDir: () => null,
  leftovers: envdLeftovers,
  ui: (ctx) => ({
    // The API key is a secret picker in the form (not typed here), so Test reaches no sandbox: the
    // SDK refuses to call without a key, and the summary says so.
    fill: { "API URL": ctx.emulator.url, "Sandbox URL": ctx.emulator.url },
    cleared: ["Template"],
    probe: /^e2b sandbox not usable: .*API key is required/,
    // A cleared field is unset: the normalized config then carries its default.
    saved: (config) => [...expectEqual("template", config.template, "base"), ...expectEqual("apiUrl", config.apiUrl, ctx.emulator.url), ...expectEqual("sandboxUrl", config.sandboxUrl, ctx.emulator.url)],
  }),
});

PROVIDERS.push({
  driverKey: "novita",
  dir: "providers/novita",
  emulator: { start: startEnvdEmulator },
  // The emulator's jail user has its home at /home/sandbox (Novita's is /home/user).
  config: (ctx) => ({ apiKey: ctx.emulator.credentials.apiKey, apiUrl: ctx.emulator.url, sandboxUrl: ctx.emulator.url, requestedCwd: "/home/sandbox/paperclip-workspace" }),
  invalidConfig: { config: { timeoutMs: 9_999 }, error: /Sandbox timeout \(ms\): must be at least 10000/ },
  missingBackend: { config: { template: "paperclip-e2e-missing" }, diagnostic: /template 'paperclip-e2e-missing' not found/ },
  reuse: true,
  timingRuns: 3,
  duplex: { runs: 1 },
  leaseDir: () => null,
  leftovers: envdLeftovers,
  ui: (ctx) => ({
    // No key typed (a secret picker): the emulator refuses the Test's create with 401.
    fill: { "API URL": ctx.emulator.url, "Sandbox URL": ctx.emulator.url, "Workspace directory": "/home/sandbox/paperclip-workspace" },
    cleared: ["Domain", "Template"],
    probe: /^novita sandbox not usable: .*401/,
    saved: (config) => [
      ...expectEqual("domain", config.domain, undefined),
      ...expectEqual("template", config.template, "base"),
      ...expectEqual("apiUrl", config.apiUrl, ctx.emulator.url),
      ...expectEqual("requestedCwd", config.requestedCwd, "/home/sandbox/paperclip-workspace"),
    ],
  }),
});
