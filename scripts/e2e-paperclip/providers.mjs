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
import fs from "node:fs";
import path from "node:path";

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
    invalidConfig: { config: { timeoutMs: -5 }, error: /timeoutMs/i },
    missingBackend: { config: { probeFailure: "e2e: fake backend is missing", acquireFailure: "e2e: fake backend is missing" }, diagnostic: /fake backend is missing/ },
    reuse: false,
    timingRuns: 0,
    duplex: { runs: 1 },
    // The provider keeps lease dirs under the worker's os.tmpdir() (the worker env has no TMPDIR).
    leaseDir: (_ctx, lease) => (lease.providerLeaseId ? path.join("/tmp/paperclip-fake-plugin-65534", lease.providerLeaseId) : null),
    leftovers: () => [],
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
    invalidConfig: { config: { cpu: -1 }, error: /cpu/i },
    missingBackend: { config: { rootfs: "/nonexistent/paperclip-e2e-rootfs" }, diagnostic: /rootfs|nonexistent/i },
    reuse: true,
    timingRuns: 5,
    targetMs: 3000,
    duplex: { runs: 3 },
    leaseDir: (ctx, lease) => (lease.providerLeaseId ? path.join(ctx.runDir, "bwrap", "leases", lease.providerLeaseId) : null),
    leftovers: (ctx) => listDirs(path.join(ctx.runDir, "bwrap", "leases")).map((name) => `lease dir bwrap/leases/${name}`),
  },
];
