/**
 * Per-sandbox cgroups: resource limits, v1 (memory, pids and cpu hierarchies, each nested under
 * this process's own cgroup in that hierarchy) or v2 (one directory under this process's cgroup),
 * and a freezer (v1 `freezer` hierarchy, or v2 `cgroup.freeze`) for warm freeze/thaw. bubblewrap
 * has no limits of its own. When the worker may not create cgroups, limits are reported as not
 * enforced instead of failing the sandbox (the probe turns that into a warning), and freeze falls
 * back to signals (freeze.ts).
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";

export interface Limits {
  cpu?: number;
  memoryMb?: number;
  pids?: number;
}

/** The limits cgroups enforce. */
type CgroupLimit = keyof Limits;
/** Every limit a sandbox may have (diskMb is a filesystem of its own, store/disk.ts). */
export type LimitName = CgroupLimit | "diskMb";

/** A cgroup that can freeze every task in it. */
export interface FreezerCgroup {
  version: 1 | 2;
  dir: string;
}

export interface SandboxCgroups {
  /** Directories created (siblings per hierarchy), the freezer's included. */
  dirs: string[];
  /** cgroup.procs files the jail's first process must join. */
  procsFiles: string[];
  /** Configured limits that could not be enforced, with the reason. */
  unenforced: Array<{ limit: LimitName; reason: string }>;
  freezer: FreezerCgroup | null;
}

const CGROUP_ROOT = "/sys/fs/cgroup";
const V1_CONTROLLER: Record<CgroupLimit, string> = { memoryMb: "memory", pids: "pids", cpu: "cpu" };
const CPU_PERIOD_US = 100_000;

/** This process's cgroup path per v1 controller ("" key for the v2 unified path). */
function ownCgroups(procSelfCgroup = "/proc/self/cgroup"): Map<string, string> {
  const map = new Map<string, string>();
  let text = "";
  try {
    text = fs.readFileSync(procSelfCgroup, "utf8");
  } catch {
    return map;
  }
  for (const line of text.split("\n")) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    const [, controllers = "", cgroupPath = "/"] = match;
    if (controllers === "") map.set("", cgroupPath);
    for (const controller of controllers.split(",")) if (controller) map.set(controller, cgroupPath);
  }
  return map;
}

function isV2Only(): boolean {
  return fs.existsSync(path.join(CGROUP_ROOT, "cgroup.controllers"));
}

function v1Dir(controller: string, own: Map<string, string>, name: string): string {
  return path.join(CGROUP_ROOT, controller, own.get(controller) ?? "/", name);
}

/** Every directory a sandbox's cgroups named `name` would have under this worker's own cgroups. */
export function cgroupDirsNamed(name: string): string[] {
  const own = ownCgroups();
  if (isV2Only()) return [path.join(CGROUP_ROOT, own.get("") ?? "/", name)];
  return [...Object.values(V1_CONTROLLER), "freezer"].map((controller) => v1Dir(controller, own, name));
}

/** Which configured limits this worker could enforce, without creating anything. */
export function probeCgroupAccess(limits: Limits): Array<{ limit: LimitName; reason: string }> {
  const wanted = (Object.keys(V1_CONTROLLER) as CgroupLimit[]).filter((name) => limits[name] !== undefined);
  const own = ownCgroups();
  const unenforced: Array<{ limit: LimitName; reason: string }> = [];
  for (const limit of wanted) {
    const parent = isV2Only() ? path.join(CGROUP_ROOT, own.get("") ?? "/") : path.join(CGROUP_ROOT, V1_CONTROLLER[limit], own.get(V1_CONTROLLER[limit]) ?? "/");
    try {
      fs.accessSync(parent, fs.constants.W_OK);
    } catch {
      unenforced.push({ limit, reason: `cannot create cgroups under ${parent} (not writable by uid ${process.getuid?.()})` });
    }
  }
  return unenforced;
}

/**
 * Creates the sandbox's cgroups named `name`, writes the limits, and (with `freezer`) a freezer
 * cgroup; never throws for a permission problem.
 */
export async function createSandboxCgroups(name: string, limits: Limits, options: { freezer: boolean }): Promise<SandboxCgroups> {
  const result: SandboxCgroups = { dirs: [], procsFiles: [], unenforced: [], freezer: null };
  const wanted = (Object.keys(V1_CONTROLLER) as CgroupLimit[]).filter((limit) => limits[limit] !== undefined);
  if (wanted.length === 0 && !options.freezer) return result;
  const own = ownCgroups();
  if (isV2Only()) {
    const dir = path.join(CGROUP_ROOT, own.get("") ?? "/", name);
    try {
      await fsp.mkdir(dir);
      result.dirs.push(dir);
      for (const limit of wanted)
        await writeV2Limit(dir, limit, limits[limit]!).catch((error: Error) => {
          result.unenforced.push({ limit, reason: error.message });
        });
      result.procsFiles.push(path.join(dir, "cgroup.procs"));
      if (options.freezer && fs.existsSync(path.join(dir, "cgroup.freeze"))) result.freezer = { version: 2, dir };
    } catch (error) {
      for (const limit of wanted) result.unenforced.push({ limit, reason: `cgroup v2: ${(error as Error).message}` });
    }
    return result;
  }
  for (const limit of wanted) {
    const controller = V1_CONTROLLER[limit];
    const dir = v1Dir(controller, own, name);
    try {
      await fsp.mkdir(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
        result.unenforced.push({ limit, reason: `cgroup v1 ${controller}: ${(error as Error).message}` });
        continue;
      }
    }
    result.dirs.push(dir);
    try {
      await writeV1Limit(dir, limit, limits[limit]!);
      result.procsFiles.push(path.join(dir, "cgroup.procs"));
    } catch (error) {
      result.unenforced.push({ limit, reason: `cgroup v1 ${controller}: ${(error as Error).message}` });
    }
  }
  if (options.freezer) {
    const dir = v1Dir("freezer", own, name);
    const made = await fsp.mkdir(dir).then(
      () => true,
      (error: NodeJS.ErrnoException) => error.code === "EEXIST",
    );
    if (made) {
      result.dirs.push(dir);
      if (fs.existsSync(path.join(dir, "freezer.state"))) {
        result.procsFiles.push(path.join(dir, "cgroup.procs"));
        result.freezer = { version: 1, dir };
      }
    }
  }
  return result;
}

async function writeV1Limit(dir: string, limit: CgroupLimit, value: number): Promise<void> {
  if (limit === "memoryMb") {
    const bytes = String(Math.floor(value * 1024 * 1024));
    await fsp.writeFile(path.join(dir, "memory.limit_in_bytes"), bytes);
    // Without the memsw limit the sandbox could spill into swap past its memory limit.
    await fsp.writeFile(path.join(dir, "memory.memsw.limit_in_bytes"), bytes).catch(() => undefined);
  } else if (limit === "pids") {
    await fsp.writeFile(path.join(dir, "pids.max"), String(value));
  } else {
    await fsp.writeFile(path.join(dir, "cpu.cfs_period_us"), String(CPU_PERIOD_US));
    await fsp.writeFile(path.join(dir, "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(value * CPU_PERIOD_US))));
  }
}

async function writeV2Limit(dir: string, limit: CgroupLimit, value: number): Promise<void> {
  if (limit === "memoryMb") {
    await fsp.writeFile(path.join(dir, "memory.max"), String(Math.floor(value * 1024 * 1024)));
    await fsp.writeFile(path.join(dir, "memory.swap.max"), "0").catch(() => undefined);
  } else if (limit === "pids") {
    await fsp.writeFile(path.join(dir, "pids.max"), String(value));
  } else {
    await fsp.writeFile(path.join(dir, "cpu.max"), `${Math.max(1000, Math.round(value * CPU_PERIOD_US))} ${CPU_PERIOD_US}`);
  }
}

/** Pids still in any of the sandbox's cgroups (empty once the jail is gone). */
export async function cgroupMembers(dirs: string[]): Promise<number[]> {
  const pids = new Set<number>();
  for (const dir of dirs) {
    try {
      const text = await fsp.readFile(path.join(dir, "cgroup.procs"), "utf8");
      for (const line of text.split("\n")) if (line.trim()) pids.add(Number(line));
    } catch {
      // Directory already removed.
    }
  }
  return [...pids];
}

/** rmdir each cgroup (only possible once empty); retried briefly while the kernel finishes exits. */
export async function removeCgroups(dirs: string[]): Promise<string[]> {
  const left: string[] = [];
  for (const dir of dirs) {
    let removed = false;
    for (let attempt = 0; attempt < 50 && !removed; attempt += 1) {
      try {
        await fsp.rmdir(dir);
        removed = true;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ENOENT") removed = true;
        else if (code === "EBUSY") await new Promise((resolve) => setTimeout(resolve, 20));
        else break;
      }
    }
    if (!removed) left.push(dir);
  }
  return left;
}
