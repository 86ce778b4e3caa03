import { randomUUID } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** What a new worker process needs to resume a lease another worker created. */
export interface FakeLeaseRecord {
  version: 1;
  providerLeaseId: string;
  companyId: string;
  environmentId: string;
  /** The lease labels acquire gave it (provider, company, environment, run): whose it is. */
  labels: Record<string, string>;
  fingerprint: string;
  reusable: boolean;
  image: string;
  createdAt: string;
  expiresAt: string | null;
}

export interface FakeLeasePaths {
  leaseDir: string;
  workspace: string;
  home: string;
  tmp: string;
}

const LEASE_ID = /^fake-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const RECORD_FILE = "lease.json";

/** Lease directories under one base directory: `<baseDir>/<leaseId>/{workspace,home,tmp,lease.json}`. */
export class FakeLeaseStore {
  constructor(readonly baseDir: string) {}

  static newLeaseId(): string {
    return `fake-${randomUUID()}`;
  }

  /** Paths of a lease, or undefined for an id this provider never issues (never a path outside baseDir). */
  paths(leaseId: string): FakeLeasePaths | undefined {
    if (!LEASE_ID.test(leaseId)) return undefined;
    const leaseDir = join(this.baseDir, leaseId);
    return { leaseDir, workspace: join(leaseDir, "workspace"), home: join(leaseDir, "home"), tmp: join(leaseDir, "tmp") };
  }

  async create(record: FakeLeaseRecord): Promise<FakeLeasePaths> {
    const paths = this.requirePaths(record.providerLeaseId);
    await mkdir(this.baseDir, { recursive: true, mode: 0o700 });
    await mkdir(paths.leaseDir, { mode: 0o700 });
    for (const dir of [paths.workspace, paths.home, paths.tmp]) await mkdir(dir, { mode: 0o700 });
    await writeFile(join(paths.leaseDir, RECORD_FILE), `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
    return paths;
  }

  async load(leaseId: string): Promise<{ record: FakeLeaseRecord; paths: FakeLeasePaths } | undefined> {
    const paths = this.paths(leaseId);
    if (!paths) return undefined;
    const text = await readFile(join(paths.leaseDir, RECORD_FILE), "utf8").catch(() => undefined);
    if (text === undefined) return undefined;
    const record = JSON.parse(text) as FakeLeaseRecord;
    return record.providerLeaseId === leaseId ? { record, paths } : undefined;
  }

  async remove(leaseId: string): Promise<void> {
    const paths = this.paths(leaseId);
    if (paths) await rm(paths.leaseDir, { recursive: true, force: true });
  }

  private requirePaths(leaseId: string): FakeLeasePaths {
    const paths = this.paths(leaseId);
    if (!paths) throw new Error(`not a fake-plugin lease id: ${JSON.stringify(leaseId)}`);
    return paths;
  }
}
