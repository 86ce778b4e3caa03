import { execFile } from "node:child_process";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { chmod, lstat, mkdir, readFile, readlink, stat, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import type { PluginSyncFileMapping } from "@paperclipai/plugin-sdk";
import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { ConformanceSkip } from "../skip.js";
import { assert, expectOk, shellQuote } from "../expect.js";
import type { AcquiredLease, ConformanceWorld } from "../world.js";

const SYNC_METHODS = ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute", "environmentSyncIn", "environmentSyncOut"];

const SHA256_IN_SANDBOX = (file: string) => `(sha256sum ${shellQuote(file)} 2>/dev/null || shasum -a 256 ${shellQuote(file)}) | cut -d' ' -f1`;

async function hostScratch(world: ConformanceWorld, label: string): Promise<string> {
  const dir = path.join(world.hostDir, `${label}-${randomUUID().slice(0, 8)}`);
  await mkdir(dir, { recursive: true });
  return dir;
}

/** One operation in one direction; the provider must report back the operation it ran. */
async function sync(direction: "in" | "out", world: ConformanceWorld, lease: AcquiredLease, files: PluginSyncFileMapping[]) {
  const operationId = `op-${direction}-${randomUUID()}`;
  const params = { ...world.base(lease.config), lease: lease.lease, operations: [{ operationId, files }] };
  const result = await (direction === "in" ? world.client.env.syncIn(params) : world.client.env.syncOut(params));
  const hook = direction === "in" ? "syncIn" : "syncOut";
  assert.equal(result?.operations?.[0]?.operationId, operationId, `${hook} must report the operation it ran, got ${JSON.stringify(result)?.slice(0, 500)}`);
  return result.operations[0]!;
}

function sha256(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

async function modeOf(file: string): Promise<number> {
  return (await stat(file)).mode & 0o777;
}

export const syncCases: ConformanceCase[] = [
  {
    name: "sync-large-file-roundtrip",
    run: (world) => {
      requireMethods(world, SYNC_METHODS);
      return world.withLease(async (lease) => {
        const dir = await hostScratch(world, "large");
        const bytes = randomBytes(5 * 1024 * 1024);
        const source = path.join(dir, "random.bin");
        await writeFile(source, bytes);
        const remote = `${lease.remoteCwd}/large/random.bin`;

        const inbound = await sync("in", world, lease, [{ sourcePath: source, targetPath: remote, kind: "file" }]);
        assert.equal(inbound.filesTransferred, 1);
        const remoteSum = await world.sh(lease, SHA256_IN_SANDBOX(remote));
        expectOk(remoteSum, "sha256 in sandbox");
        assert.equal(remoteSum.stdout.trim(), sha256(bytes), "file changed on the way in");

        const back = path.join(dir, "back", "random.bin");
        await sync("out", world, lease, [{ sourcePath: remote, targetPath: back, kind: "file" }]);
        assert.equal(sha256(await readFile(back)), sha256(bytes), "file changed on the way out");
      });
    },
  },
  {
    name: "sync-tree-modes-symlinks-excludes",
    run: (world) => {
      requireMethods(world, SYNC_METHODS);
      return world.withLease(async (lease) => {
        const dir = await hostScratch(world, "tree");
        const tree = path.join(dir, "tree");
        await mkdir(path.join(tree, "nested"), { recursive: true });
        await writeFile(path.join(tree, "run.sh"), "#!/bin/sh\necho ran\n");
        await chmod(path.join(tree, "run.sh"), 0o755);
        await writeFile(path.join(tree, "secret.txt"), "not for others\n");
        await chmod(path.join(tree, "secret.txt"), 0o600);
        await writeFile(path.join(tree, "nested", "note.txt"), "nested file\n");
        await symlink("run.sh", path.join(tree, "link-to-run"));
        await writeFile(path.join(tree, "debug.log"), "excluded\n");
        const remote = `${lease.remoteCwd}/tree`;

        await sync("in", world, lease, [{ sourcePath: tree, targetPath: remote, kind: "directory", exclude: ["*.log"] }]);
        const inspect = await world.sh(
          lease,
          `cd ${shellQuote(remote)} && stat -c '%a' run.sh secret.txt && readlink link-to-run && cat nested/note.txt && ` +
            `if [ -e debug.log ]; then echo excluded-present; else echo excluded-absent; fi && ./run.sh`,
        );
        expectOk(inspect, "inspect synced tree");
        assert.deepEqual(inspect.stdout.split("\n").filter(Boolean), ["755", "600", "run.sh", "nested file", "excluded-absent", "ran"]);

        const back = path.join(dir, "back");
        await sync("out", world, lease, [{ sourcePath: remote, targetPath: back, kind: "directory" }]);
        assert.equal(await modeOf(path.join(back, "run.sh")), 0o755, "run.sh mode on the way out");
        assert.equal(await modeOf(path.join(back, "secret.txt")), 0o600, "secret.txt mode on the way out");
        assert.ok((await lstat(path.join(back, "link-to-run"))).isSymbolicLink(), "symlink must stay a symlink");
        assert.equal(await readlink(path.join(back, "link-to-run")), "run.sh");
        assert.equal(await readFile(path.join(back, "nested", "note.txt"), "utf8"), "nested file\n");
        await assert.rejects(stat(path.join(back, "debug.log")), "excluded file came back");
      });
    },
  },
  {
    name: "sync-single-file-mode",
    run: (world) => {
      requireMethods(world, SYNC_METHODS);
      return world.withLease(async (lease) => {
        const dir = await hostScratch(world, "mode");
        const source = path.join(dir, "credentials.json");
        await writeFile(source, '{"token":"placeholder"}\n', { mode: 0o644 });
        await chmod(source, 0o644);
        const remote = `${lease.remoteCwd}/secrets/credentials.json`;

        await sync("in", world, lease, [{ sourcePath: source, targetPath: remote, kind: "file", mode: 0o600 }]);
        const remoteMode = await world.sh(lease, `stat -c '%a' ${shellQuote(remote)}`);
        expectOk(remoteMode, "stat in sandbox");
        assert.equal(remoteMode.stdout.trim(), "600", "mode 0600 not applied in the sandbox");

        expectOk(await world.sh(lease, `chmod 0644 ${shellQuote(remote)}`), "loosen the sandbox copy");
        const back = path.join(dir, "back", "credentials.json");
        await sync("out", world, lease, [{ sourcePath: remote, targetPath: back, kind: "file", mode: 0o600 }]);
        assert.equal(await modeOf(back), 0o600, "mode 0600 not applied on the host");
        assert.equal(await readFile(back, "utf8"), '{"token":"placeholder"}\n');
      });
    },
  },
  {
    // The host runs a run's four inbound transfers (workspace, skills, MCP config, config seed) at
    // once when the driver declares concurrentSyncOperations, each a tar upload plus a post-upload
    // `tar -x`; and its outbound restores likewise. Every transfer must land whole and in its place.
    name: "sync-concurrent-operations",
    run: (world) => {
      requireMethods(world, SYNC_METHODS);
      if (world.driver?.sandboxCapabilities?.concurrentSyncOperations !== true) {
        throw new ConformanceSkip("the driver does not declare sandboxCapabilities.concurrentSyncOperations");
      }
      return world.withLease(async (lease) => {
        const dir = await hostScratch(world, "concurrent");
        const names = ["workspace", "skills", "mcp-config", "config-seed"];
        const runtime = `${lease.remoteCwd}/.paperclip-runtime/conformance`;
        const contents = new Map<string, Buffer>();
        const inbound = await Promise.all(
          names.map(async (name) => {
            const tree = path.join(dir, "src", name);
            await mkdir(path.join(tree, "nested"), { recursive: true });
            const bytes = randomBytes(256 * 1024 + names.indexOf(name));
            contents.set(name, bytes);
            await writeFile(path.join(tree, "nested", "data.bin"), bytes);
            await writeFile(path.join(tree, "name.txt"), `${name}\n`);
            const tarball = path.join(dir, `${name}.tar`);
            await promisify(execFile)("tar", ["-cf", tarball, "-C", tree, "."]);
            const upload = `${runtime}/${name}-upload.tar`;
            const target = `${runtime}/${name}`;
            const operationId = `op-in-${name}-${randomUUID()}`;
            const result = await world.client.env.syncIn({
              ...world.base(lease.config),
              lease: lease.lease,
              operations: [
                {
                  operationId,
                  files: [{ sourcePath: tarball, targetPath: upload, kind: "file" }],
                  postUploadCommands: [
                    {
                      command: `rm -rf ${shellQuote(target)} && mkdir -p ${shellQuote(target)} && tar -xf ${shellQuote(upload)} -C ${shellQuote(target)} && rm -f ${shellQuote(upload)}`,
                    },
                  ],
                },
              ],
            });
            return { name, operationId, reported: result?.operations?.[0]?.operationId };
          }),
        );
        for (const op of inbound) assert.equal(op.reported, op.operationId, `syncIn of ${op.name} reported another operation`);

        const outbound = await Promise.all(
          names.map(async (name) => {
            const back = path.join(dir, "back", name);
            await sync("out", world, lease, [{ sourcePath: `${runtime}/${name}`, targetPath: back, kind: "directory" }]);
            return { name, back };
          }),
        );
        for (const { name, back } of outbound) {
          assert.equal(await readFile(path.join(back, "name.txt"), "utf8"), `${name}\n`, `${name}: wrong tree came back`);
          assert.equal(sha256(await readFile(path.join(back, "nested", "data.bin"))), sha256(contents.get(name)!), `${name}: data changed`);
        }
        const leftovers = await world.sh(lease, `ls -A ${shellQuote(runtime)}`);
        expectOk(leftovers, "list the runtime dir");
        assert.equal(leftovers.stdout.split("\n").filter(Boolean).sort().join(" "), [...names].sort().join(" "), "uploads or stages left behind");
      });
    },
  },
];
