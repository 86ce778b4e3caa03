// The locally runnable providers the e2e drives through the real host. To add one, append an entry:
//   driverKey       the manifest driver key (environment config.provider)
//   dir             package dir relative to the repo root (built: paperclipPlugin.{manifest,worker})
//   config(ctx)     the environment config for the task runs (ctx.runDir is a scratch dir the server user owns)
//   invalidConfig   a config validateConfig must refuse, and a regex the host's 4xx error must match
//   missingBackend  a config whose backend is absent: probe-config must fail with a diagnostic matching the regex
//   reuse           run the reuseLease scenario (second run on the same issue resumes the same lease)
//   reuseKeepsProcess  the resumed lease must also still run a process the first run left (a suspended VM)
//   timingRuns      extra trivial runs whose assignment -> lease-release median is reported
//   targetMs        optional median target for timingRuns (a miss is reported, it does not fail the run)
//   duplex          { runs }: also run tasks with the host's experimental duplex (HTTP/2) callback bridge on
//   acp             also run a task with an ACP-engine agent (the fake ACP agent): the run streams its session
//                   output when the driver declares incrementalSessionOutput, else the host polls output files
//   leaseDir(ctx, lease)  host dir a lease lives in (checked gone after release), or null
//   prepare(ctx)    optional: create what the config needs before the scenario (runs as root; the server is nobody)
//   leftovers(ctx)  extra provider-specific leftovers to report after the runs (strings, or a promise of them), e.g. state-dir entries
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
const expectEqual = (what, actual, expected) => (JSON.stringify(actual) === JSON.stringify(expected) ? [] : [`${what} is ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`]);

const listDirs = (dir) => {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
};

/** @type {Record<string, any>[]} the fields above; checked by the e2e, not by the type */
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
    acp: true,
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
    acp: true,
    leaseDir: (ctx, lease) => (lease.providerLeaseId ? path.join(ctx.runDir, "bwrap", "leases", lease.providerLeaseId) : null),
    leftovers: (ctx) => listDirs(path.join(ctx.runDir, "bwrap", "leases")).map((name) => `lease dir bwrap/leases/${name}`),
    // Custom images: the file is installed through the host's browser terminal (bubblewrap declares the
    // kit's ssh setup connection), so no `install` here.
    customImage: {
      templates: (ctx) => listDirs(path.join(ctx.runDir, "bwrap", "templates")),
    },
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
        ? /^bubblewrap sandbox ready — disk limit NOT enforced: diskMb 1024 MiB \(a per-sandbox filesystem needs a root worker \(this one is uid 65534\)\)$/
        : /^bubblewrap sandbox ready — limits NOT enforced: memoryMb \(the worker cannot create cgroups\); disk limit NOT enforced: diskMb 1024 MiB \(a per-sandbox filesystem needs a root worker \(this one is uid 65534\)\)$/,
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
  {
    driverKey: "daytona",
    dir: "providers/daytona",
    // The Daytona emulator (control plane + toolbox on one loopback port, sandboxes are backend jails
    // with the host's /usr), started by the e2e as root; the worker reaches it over plain HTTP.
    emulator: {
      start: async (ctx) => {
        const { runEmulator } = await import("../../packages/emulator-kit/dist/index.js");
        const { emulator } = await import("../../emulators/daytona/dist/index.js");
        // Traversable: as root, the emulator's jails run as an unprivileged host uid that must pass it.
        fs.mkdirSync(path.join(ctx.runDir, "daytona"), { recursive: true, mode: 0o711 });
        fs.chmodSync(path.join(ctx.runDir, "daytona"), 0o711);
        return runEmulator(emulator, { options: { stateParentDir: path.join(ctx.runDir, "daytona") } });
      },
    },
    config: (ctx) => ({ apiKey: ctx.emulator.credentials.apiKey, apiUrl: ctx.emulator.url }),
    invalidConfig: { config: { cpu: 2 }, error: /Daytona resource settings require image-backed sandbox creation; snapshot\/default sandbox creation cannot override CPU, memory, disk, or GPU/ },
    // Nothing listens on port 9: the probe's create fails on the connection, and says so.
    missingBackend: { config: { apiUrl: "http://127.0.0.1:9/api" }, diagnostic: /daytona createSandbox failed: no response \(connect_failed\)/ },
    reuse: true,
    timingRuns: 3,
    acp: true,
    leaseDir: () => null,
    // Every sandbox the runs made is gone: no jail directory left in the emulator's state dir.
    leftovers: (ctx) => listDirs(path.join(ctx.runDir, "daytona")).flatMap((state) => listDirs(path.join(ctx.runDir, "daytona", state, "b", "leases")).map((id) => `daytona sandbox jail ${id}`)),
    // Custom images: the file is installed through the host's browser terminal (the kit's ssh setup
    // connection over the sandbox's PTY), so no `install` here.
    customImage: {
      templates: async (ctx) => {
        const answer = await fetch(`${ctx.emulator.url}/snapshots?limit=200`, { headers: { authorization: `Bearer ${ctx.emulator.credentials.apiKey}` } });
        const page = /** @type {{ items: { name: string }[] }} */ (await answer.json());
        return page.items.map((snapshot) => snapshot.name);
      },
    },
    ui: (ctx) => ({
      fill: { "API key": ctx.emulator.credentials.apiKey, "API URL": ctx.emulator.url },
      cleared: ["Snapshot", "Target"],
      probe: /^daytona sandbox ready$/,
      saved: (config) => [
        ...expectEqual("apiUrl", config.apiUrl, ctx.emulator.url),
        ...expectEqual("snapshot", config.snapshot, undefined),
        ...expectEqual("target", config.target, undefined),
        ...expectEqual("autoStopInterval", config.autoStopInterval, 15),
      ],
    }),
  },
  {
    driverKey: "modal",
    dir: "providers/modal",
    // Against the Modal emulator (emulators/modal, gRPC on loopback; its sandboxes are bubblewrap jails
    // run by this root process). The SDK reads its server from MODAL_SERVER_URL only, which the host's
    // worker does not get: the provider's serverUrl field carries it.
    emulator: {
      async start(ctx) {
        const { runEmulator } = await import("../../packages/emulator-kit/dist/index.js");
        const { emulator } = await import("../../emulators/modal/dist/index.js");
        const scratchParent = path.join(ctx.runDir, "modal-emu");
        // Traversable: as root, the emulator's jails run as an unprivileged host uid that must pass it.
        fs.mkdirSync(scratchParent, { recursive: true, mode: 0o711 });
        fs.chmodSync(scratchParent, 0o711);
        const running = await runEmulator(emulator, { options: { scratchParent } });
        return Object.assign(running, { scratchParent });
      },
    },
    config: (ctx) => ({
      appName: "paperclip-e2e",
      image: "node:22",
      tokenId: ctx.emulator.credentials.tokenId,
      tokenSecret: ctx.emulator.credentials.tokenSecret,
      serverUrl: ctx.emulator.url,
    }),
    invalidConfig: { config: { sandboxTimeoutMs: 1500 }, error: /Sandbox timeout \(ms\): must be a whole number of seconds \(a multiple of 1000\)/ },
    // Nothing listens on port 9: the probe cannot reach Modal and says so.
    missingBackend: { config: { serverUrl: "http://127.0.0.1:9" }, diagnostic: /UNAVAILABLE|ECONNREFUSED|No connection/i },
    reuse: true,
    timingRuns: 3,
    acp: true,
    duplex: { runs: 1 },
    leaseDir: () => null,
    // The emulator's running sandboxes are jail directories, its snapshots image directories.
    leftovers: (ctx) => {
      const parent = ctx.emulator?.scratchParent;
      if (!parent) return [];
      return listDirs(parent).flatMap((scratch) => [
        ...listDirs(path.join(parent, scratch, "b", "leases")).map((id) => `modal emulator sandbox ${id} still running`),
        ...listDirs(path.join(parent, scratch, "images")).map((id) => `modal emulator snapshot image ${id}`),
      ]);
    },
    // Custom images: the file is installed through the host's browser terminal (the kit's ssh setup
    // connection over Modal's PTY execs), so no `install` here. A template is a published image name
    // whose image exists.
    customImage: {
      templates: async (ctx) => (await ctx.emulator.leftovers()).flatMap((item) => /^image name (\S+):latest in /.exec(item)?.[1] ?? []),
    },
    ui: (ctx) => ({
      fill: { "Token ID": ctx.emulator.credentials.tokenId, "Token secret": ctx.emulator.credentials.tokenSecret, "API server URL": ctx.emulator.url },
      cleared: ["Modal environment"],
      badItems: [{ list: "Allowed IP ranges", value: "10.0.0.1" }],
      goodItems: { "Allowed IP ranges": "10.0.0.0/8" },
      probe: /^modal sandbox ready$/,
      saved: (config) => [
        ...expectEqual("serverUrl", config.serverUrl, ctx.emulator.url),
        ...expectEqual("environment", config.environment, undefined),
        ...expectEqual("cidrAllowlist", config.cidrAllowlist, ["10.0.0.0/8"]),
      ],
    }),
  },
];

// Kubernetes, against the in-repo Kubernetes API test server (pods are jails of the host's /usr, so
// the fake claude CLI installed there is on the pod's PATH). Leftovers are read from its store.
let kubernetesCluster;
PROVIDERS.push({
  driverKey: "kubernetes",
  dir: "providers/kubernetes",
  emulator: {
    start: async () => {
      const { runEmulator } = await import("../../packages/emulator-kit/dist/index.js");
      const { emulator } = await import("../../emulators/kubernetes/dist/index.js");
      return runEmulator(emulator, { options: { expose: (cluster) => (kubernetesCluster = cluster) } });
    },
  },
  config: (ctx) => ({ kubeconfig: ctx.emulator.credentials.kubeconfig, readyTimeoutSec: 60 }),
  invalidConfig: { config: { cpuLimit: "lots" }, error: /CPU limit: must be a Kubernetes quantity/ },
  missingBackend: {
    config: {
      kubeconfig: JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "c", cluster: { server: "http://127.0.0.1:9", "insecure-skip-tls-verify": true } }],
        users: [{ name: "u", user: { token: "e2e" } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
        "current-context": "x",
      }),
    },
    diagnostic: /kubernetes (getCode|getAPIVersions|createNamespace) failed: no response/,
  },
  reuse: true,
  timingRuns: 3,
  acp: true,
  duplex: { runs: 1 },
  leaseDir: () => null,
  // Tenant baseline objects stay (they are the company's, made once); run objects must be gone.
  leftovers: () =>
    (kubernetesCluster?.leftovers() ?? []).filter((entry) => !/^(serviceaccounts|roles|rolebindings|resourcequotas|limitranges|networkpolicies|ciliumnetworkpolicies)\/[^/]+\/paperclip-/.test(entry)),
  ui: () => ({
    cleared: ["Company slug"],
    badItems: [
      { list: "Allowed host names", value: "not a host!" },
      { list: "Allowed IP ranges", value: "10.0.0.0/99" },
    ],
    goodItems: { "Allowed host names": "api.github.com", "Allowed IP ranges": "10.0.0.0/8" },
    // The form's secret fields need a picker the browser test does not drive: no credentials, so the
    // probe's summary says what is missing (the saved-probe and task runs use the kubeconfig).
    probe: /^Kubernetes: Configuration: Credentials: none set: set Kubeconfig, Kubeconfig secret or In-cluster credentials \(the worker is not running in a cluster\)$/,
    saved: (config) => [
      ...expectEqual("companySlug", config.companySlug, undefined),
      ...expectEqual("egressAllowFqdns", config.egressAllowFqdns, ["api.github.com"]),
      ...expectEqual("egressAllowCidrs", config.egressAllowCidrs, ["10.0.0.0/8"]),
      ...expectEqual("backend", config.backend, "sandbox-cr"),
    ],
  }),
});

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
  acp: true,
  duplex: { runs: 1 },
  leaseDir: () => null,
  leftovers: envdLeftovers,
  // Custom images: the file is installed through the host's browser terminal (the kit's ssh setup
  // connection over the sandbox's PTY), so no `install` here.
  customImage: {
    templates: async (ctx) => {
      const answer = await fetch(`${ctx.emulator.url}/snapshots`, { headers: { "x-api-key": ctx.emulator.credentials.apiKey } });
      const snapshots = /** @type {{ snapshotID: string }[]} */ (await answer.json());
      return snapshots.map((snapshot) => snapshot.snapshotID);
    },
  },
  ui: (ctx) => ({
    // The API key is a secret picker in the form (not typed here), so Test reaches no sandbox: the
    // SDK refuses to call without a key, and the summary says so.
    fill: { "API URL": ctx.emulator.url, "Sandbox URL": ctx.emulator.url },
    cleared: ["Template"],
    probe: /^e2b sandbox not usable: .*API key is required/,
    // A cleared field is unset: the normalized config then carries its default.
    saved: (config) => [
      ...expectEqual("template", config.template, "base"),
      ...expectEqual("apiUrl", config.apiUrl, ctx.emulator.url),
      ...expectEqual("sandboxUrl", config.sandboxUrl, ctx.emulator.url),
    ],
  }),
});

PROVIDERS.push({
  driverKey: "novita",
  dir: "providers/novita",
  emulator: { start: startEnvdEmulator },
  // The emulator's sandbox user is Novita's own (`user`, home /home/user): its default workspace works.
  config: (ctx) => ({ apiKey: ctx.emulator.credentials.apiKey, apiUrl: ctx.emulator.url, sandboxUrl: ctx.emulator.url, requestedCwd: "/home/user/paperclip-workspace" }),
  invalidConfig: { config: { timeoutMs: 9_999 }, error: /Sandbox timeout \(ms\): must be at least 10000/ },
  missingBackend: { config: { template: "paperclip-e2e-missing" }, diagnostic: /template 'paperclip-e2e-missing' not found/ },
  reuse: true,
  timingRuns: 3,
  acp: true,
  duplex: { runs: 1 },
  leaseDir: () => null,
  leftovers: envdLeftovers,
  ui: (ctx) => ({
    // No key typed (a secret picker): the emulator refuses the Test's create with 401.
    fill: { "API URL": ctx.emulator.url, "Sandbox URL": ctx.emulator.url, "Workspace directory": "/home/user/paperclip-workspace" },
    cleared: ["Domain", "Template"],
    probe: /^novita sandbox not usable: .*401/,
    saved: (config) => [
      ...expectEqual("domain", config.domain, undefined),
      ...expectEqual("template", config.template, "base"),
      ...expectEqual("apiUrl", config.apiUrl, ctx.emulator.url),
      ...expectEqual("requestedCwd", config.requestedCwd, "/home/user/paperclip-workspace"),
    ],
  }),
});

PROVIDERS.push({
  driverKey: "exe-dev",
  dir: "providers/exe-dev",
  // The exe.dev emulator (emulators/exe-dev), started by the e2e as root: its /exec API on a loopback
  // port (https, and plain http on the same port: the host's worker gets no NODE_EXTRA_CA_CERTS, so
  // it uses http) and a real OpenSSH server per VM whose sessions run in that VM's bubblewrap jail.
  // The worker (nobody) keeps its key file, known_hosts and control socket under /tmp/paperclip-exe-dev-65534.
  emulator: {
    async start(ctx) {
      const { runEmulator } = await import("../../packages/emulator-kit/dist/index.js");
      const { emulator } = await import("../../emulators/exe-dev/dist/index.js");
      const stateParent = path.join(ctx.runDir, "exe-dev");
      // Traversable: as root, the emulator's jails run as an unprivileged host uid that must pass it.
      fs.mkdirSync(stateParent, { recursive: true, mode: 0o711 });
      fs.chmodSync(stateParent, 0o711);
      // The token may also copy and tag VMs (custom images: cp makes templates and runs from them).
      const running = await runEmulator(emulator, { options: { stateParentDir: stateParent, tokenCmds: ["new", "ls", "rm", "cp", "tag", "whoami"] } });
      return Object.assign(running, { stateParent });
    },
  },
  config: (ctx) => ({ apiKey: ctx.emulator.credentials.apiKey, apiUrl: ctx.emulator.endpoints.http, sshPrivateKey: ctx.emulator.credentials.sshPrivateKey }),
  invalidConfig: { config: { namePrefix: "Paperclip" }, error: /VM name prefix: must start with a lower-case letter and hold lower-case letters and digits, with single hyphens between them/ },
  // Nothing listens on port 49 (fetch refuses port 9 outright, as a "bad port"): the probe's create
  // fails on the connection, and says so.
  missingBackend: { config: { apiUrl: "http://127.0.0.1:49/exec" }, diagnostic: /exe\.dev new failed: no response \(connect_failed\)/ },
  reuse: true,
  timingRuns: 3,
  acp: true,
  duplex: { runs: 1 },
  // The host fails the Claude setup-token login closed (it needs an expiry within 5 minutes).
  leasesWithoutExpiry: "exe.dev VMs live until deleted",
  leaseDir: () => null,
  // Custom images: the file is installed through the host's browser terminal (the kit's ssh setup
  // connection over the VM's `ssh -tt` channels), so no `install` here. A template is a VM (a cp of
  // the setup VM) named by the kit's owner digest.
  customImage: {
    templates: async (ctx) => (await ctx.emulator.leftovers()).flatMap((item) => /^vm (pc-[0-9a-f]{16}-[0-9a-f]{8}) /.exec(item)?.[1] ?? []),
  },
  // Every VM the runs made is gone: no jail directory left in the emulator's state dir.
  leftovers: (ctx) => {
    const parent = ctx.emulator?.stateParent;
    if (!parent) return [];
    return listDirs(parent).flatMap((state) => listDirs(path.join(parent, state, "b", "leases")).map((id) => `exe.dev emulator VM jail ${id}`));
  },
  ui: (ctx) => ({
    // The secret field's raw-value input is one line: the key arrives without its line breaks, which the provider restores.
    fill: { "API token": ctx.emulator.credentials.apiKey, "API URL": ctx.emulator.endpoints.http, "SSH private key": ctx.emulator.credentials.sshPrivateKey },
    cleared: ["Image", "SSH user"],
    badItems: [{ list: "Tags", value: "Not A Tag" }],
    goodItems: { Tags: "ci" },
    // The probe names the repair (the form shows no validation warning, only this summary).
    probe: /^exe-dev sandbox ready — SSH private key: its line breaks were lost \(pasted into a one-line field\); restored$/,
    saved: (config) => [
      ...expectEqual("apiUrl", config.apiUrl, ctx.emulator.endpoints.http),
      ...expectEqual("image", config.image, undefined),
      ...expectEqual("sshUser", config.sshUser, undefined),
      ...expectEqual("tags", config.tags, ["ci"]),
      ...expectEqual("namePrefix", config.namePrefix, "paperclip"),
    ],
  }),
});

// boxd, against the boxd emulator (emulators/boxd: boxd.api.v1.BoxdApi over h2c on loopback plus
// the API-key exchange on HTTP; machines are bubblewrap jails run by this root process). The
// provider's apiUrl and exchangeUrl carry the loopback endpoints (plaintext is allowed for loopback).
PROVIDERS.push({
  driverKey: "boxd",
  dir: "providers/boxd",
  emulator: {
    async start(ctx) {
      const { runEmulator } = await import("../../packages/emulator-kit/dist/index.js");
      const { emulator } = await import("../../emulators/boxd/dist/index.js");
      const scratchParent = path.join(ctx.runDir, "boxd-emu");
      // Traversable: as root, the emulator's jails run as an unprivileged host uid that must pass it.
      fs.mkdirSync(scratchParent, { recursive: true, mode: 0o711 });
      fs.chmodSync(scratchParent, 0o711);
      const running = await runEmulator(emulator, { options: { scratchParent } });
      return Object.assign(running, { scratchParent });
    },
  },
  config: (ctx) => ({ apiKey: ctx.emulator.credentials.apiKey, apiUrl: ctx.emulator.url, exchangeUrl: ctx.emulator.endpoints.exchange }),
  invalidConfig: { config: { vcpu: 3 }, error: /vCPUs: must be one of 1, 2, 4, 8 \(boxd's sizes\)/ },
  // Nothing listens on port 9: the probe's create cannot reach boxd and says so.
  missingBackend: { config: { apiUrl: "http://127.0.0.1:9" }, diagnostic: /boxd CreateVm failed: .*unavailable/ },
  reuse: true,
  reuseKeepsProcess: true,
  timingRuns: 3,
  acp: true,
  duplex: { runs: 1 },
  leaseDir: () => null,
  // The emulator's machines are jail directories; none may be left.
  leftovers: (ctx) => {
    const parent = ctx.emulator?.scratchParent;
    if (!parent) return [];
    return listDirs(parent).flatMap((scratch) => [
      ...listDirs(path.join(parent, scratch, "b", "leases")).map((id) => `boxd emulator machine ${id} still there`),
      ...listDirs(path.join(parent, scratch, "snapshots")).map((id) => `boxd emulator snapshot ${id}`),
    ]);
  },
  // Custom images: the file is installed through the host's browser terminal (the kit's ssh setup
  // connection over the sandbox's PTY), so no `install` here.
  customImage: {
    templates: async (ctx) => (await ctx.emulator.leftovers()).flatMap((item) => /^snapshot [^/]+\/(\S+) v\d+$/.exec(item)?.[1] ?? []),
  },
  ui: (ctx) => ({
    fill: { "API key": ctx.emulator.credentials.apiKey, "API URL": ctx.emulator.url, "Token exchange URL": ctx.emulator.endpoints.exchange },
    cleared: ["Org", "Snapshot"],
    probe: /^boxd sandbox ready$/,
    saved: (config) => [
      ...expectEqual("apiUrl", config.apiUrl, ctx.emulator.url),
      ...expectEqual("exchangeUrl", config.exchangeUrl, ctx.emulator.endpoints.exchange),
      ...expectEqual("org", config.org, undefined),
      ...expectEqual("snapshot", config.snapshot, undefined),
      ...expectEqual("namePrefix", config.namePrefix, "paperclip"),
    ],
  }),
});

// Cloudflare, against its bridge Worker running for real in workerd (emulators/cloudflare: miniflare
// runs the bridge and @cloudflare/sandbox 0.7.21; each container is a sandbox-backend jail owned by
// root). The worker reaches the bridge over plain HTTP on loopback, as an operator's plugin would
// reach a deployed Worker over HTTPS.
PROVIDERS.push({
  driverKey: "cloudflare",
  dir: "providers/cloudflare",
  emulator: {
    start: async () => {
      const { runEmulator } = await import("../../packages/emulator-kit/dist/index.js");
      const { emulator } = await import("../../emulators/cloudflare/dist/index.js");
      return runEmulator(emulator);
    },
  },
  // Keep-alive on: the reuse scenario adds reuseLease, which needs it.
  config: (ctx) => ({ bridgeBaseUrl: ctx.emulator.url, bridgeAuthToken: ctx.emulator.credentials.token, keepAlive: true }),
  invalidConfig: { config: { reuseLease: true, keepAlive: false }, error: /Reuse lease: needs Keep alive on/ },
  // Nothing listens on port 2 (fetch refuses port 9 outright as a "bad port"): the probe's first
  // bridge call fails on the connection, and says so.
  missingBackend: { config: { bridgeBaseUrl: "http://127.0.0.1:2" }, diagnostic: /cloudflare health failed: no response \(connect_failed\)/ },
  reuse: true,
  timingRuns: 3,
  acp: true,
  duplex: { runs: 1 },
  leaseDir: () => null,
  // Every container the runs made is gone (a destroyed sandbox's jail is removed).
  leftovers: async (ctx) => (ctx.emulator ? await ctx.emulator.leftovers() : []),
  ui: (ctx) => ({
    fill: { "Bridge URL": ctx.emulator.url, "Bridge token": ctx.emulator.credentials.token },
    cleared: ["Sleep after"],
    probe: /^cloudflare sandbox ready$/,
    saved: (config) => [
      ...expectEqual("bridgeBaseUrl", config.bridgeBaseUrl, ctx.emulator.url),
      ...expectEqual("sleepAfter", config.sleepAfter, "1h"),
      ...expectEqual("sessionId", config.sessionId, undefined),
    ],
  }),
});

// Coder, against the Coder emulator (REST API v2, app proxy and PTY; workspaces are jails whose user
// is coder in /home/coder, run by this root process). Its template installs and starts the runner
// app the provider ships (the built dist/runner/), as a real template would.
PROVIDERS.push({
  driverKey: "coder",
  dir: "providers/coder",
  emulator: {
    async start(ctx) {
      const { runEmulator } = await import(new URL("../../packages/emulator-kit/dist/index.js", import.meta.url).href);
      const { emulator } = await import(new URL("../../emulators/coder/dist/index.js", import.meta.url).href);
      const { runnerEmulatorTemplate } = await import(new URL("../../providers/coder/dist/runner-install.js", import.meta.url).href);
      const stateParentDir = path.join(ctx.runDir, "coder");
      // Traversable: as root, the emulator's jails run as an unprivileged host uid that must pass it.
      fs.mkdirSync(stateParentDir, { recursive: true, mode: 0o711 });
      fs.chmodSync(stateParentDir, 0o711);
      const running = await runEmulator(emulator, { options: { stateParentDir, templates: [runnerEmulatorTemplate()] } });
      return Object.assign(running, { stateParentDir });
    },
  },
  config: (ctx) => ({ coderUrl: ctx.emulator.url, apiToken: ctx.emulator.credentials.sessionToken, template: "paperclip" }),
  invalidConfig: { config: { remoteCwd: "/workspace" }, error: /Workspace directory: must be a directory directly under \/home\/coder/ },
  // Nothing listens on port 5 (fetch refuses port 9 outright): the probe's first control-plane call fails on the connection, and says so.
  missingBackend: { config: { coderUrl: "http://127.0.0.1:5" }, diagnostic: /coder getOrganizations failed: no response \(connect_failed\)/ },
  reuse: true,
  timingRuns: 3,
  acp: true,
  duplex: { runs: 1 },
  leaseDir: () => null,
  // Every workspace the runs made is gone: no jail directory left in the emulator's state dir.
  leftovers: (ctx) => {
    const parent = ctx.emulator?.stateParentDir;
    if (!parent) return [];
    return listDirs(parent).flatMap((state) => listDirs(path.join(parent, state, "leases")).map((id) => `coder workspace jail ${id}`));
  },
  ui: (ctx) => ({
    fill: { "Coder URL": ctx.emulator.url, "Session token": ctx.emulator.credentials.sessionToken, Template: "paperclip" },
    cleared: ["Worker image (recorded only)", "Workspace directory"],
    probe: /^coder sandbox ready$/,
    saved: (config) => [
      ...expectEqual("coderUrl", config.coderUrl, ctx.emulator.url),
      ...expectEqual("template", config.template, "paperclip"),
      ...expectEqual("workerImage", config.workerImage, undefined),
      ...expectEqual("commandTransport", config.commandTransport, "app-proxy"),
      ...expectEqual("workspaceDir", config.workspaceDir, undefined),
    ],
  }),
});
