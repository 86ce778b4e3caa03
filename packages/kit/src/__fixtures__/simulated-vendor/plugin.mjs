// A "vendor" for each transport family the kit adapts, so every adapter is proven through the whole
// lifecycle layer and the conformance suite: real commands (our test scripts, in a temp directory
// per lease on this machine, as fake-plugin does), with the wire shape of a real vendor API.
//   buffered     request/response exec, output returned as text (not binary-safe), no signals
//   file-stdio   exec with no stdin and combined output, plus a file API
//   pid-signals  streamed exec whose abort reaches only the script's pid
//   no-eof       streamed exec whose stdin never gets EOF
//   no-env       streamed exec with no env field
//   channel      pid-signals with the kit's command channel: every command (the first waits for
//                it) runs over one multiplexer in the "sandbox"; conformance runs it beside
//                pid-signals, the same transport without it
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { PassThrough } from "node:stream";
import { z } from "zod";
import {
  STREAM_TRANSPORT,
  createBufferedRunner,
  createFileStdioRunner,
  createLocalScriptRunner,
  defineProviderConfig,
  defineSandboxProvider,
  defineSandboxProviderManifest,
  endMarkedProcesses,
  fields,
  runSpawnedScript,
  withInlineEnv,
  withLengthFramedStdin,
  commandChannelStatus,
  withCommandChannel,
  withRemoteGroupKill,
} from "@paperclip-sandbox/kit";

const MARKER = "PAPERCLIP_SIMULATED_VENDOR_LEASE";
const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const config = defineProviderConfig(
  z.object({
    timeoutMs: fields.timeoutMs({ default: 60_000 }),
    reuseLease: z.boolean().default(false),
  }),
);

const collect = () => {
  const chunks = [];
  return { sink: (chunk) => chunks.push(chunk), bytes: () => Buffer.concat(chunks) };
};

/** The vendor's own execution engine for one sandbox directory. */
function engine(dirs, leaseId) {
  const env = { PATH, HOME: dirs.home, TMPDIR: dirs.tmp, LANG: "C.UTF-8", [MARKER]: leaseId };
  return { env, local: createLocalScriptRunner({ cwd: dirs.workspace, env }) };
}

/** A streamed exec whose abort reaches only the script's pid, lifted to group kill by a second call. */
function pidSignalsRunner(env, dirs) {
  const pidOnly = {
    capabilities: { ...STREAM_TRANSPORT, signals: "pid" },
    run: (script, io) =>
      runSpawnedScript(
        {
          file: "/bin/sh",
          args: ["-c", script],
          cwd: dirs.workspace,
          env,
          terminate: async (child) => {
            child.kill("SIGKILL"); // the vendor's signal API reaches this one process only
          },
        },
        io,
      ),
  };
  return withRemoteGroupKill(pidOnly);
}

const transports = {
  buffered: {
    capabilities: { ...STREAM_TRANSPORT, stdin: "buffered", binarySafe: false, liveOutput: false, signals: "group" },
    make({ local }) {
      const text = createBufferedRunner({
        capabilities: { binarySafe: false, separateStderr: true, remoteTimeout: false },
        exec: async (request) => {
          const out = collect();
          const err = collect();
          // The vendor ignores disconnects: an abort never reaches the command.
          const exit = await local.run(request.script, { stdin: request.stdin ?? null, env: request.env, stdout: out.sink, stderr: err.sink });
          return { exitCode: exit.exitCode, signal: exit.signal, stdout: out.bytes().toString("utf8"), stderr: err.bytes().toString("utf8") };
        },
      });
      return withRemoteGroupKill(text);
    },
  },
  "file-stdio": {
    capabilities: { ...STREAM_TRANSPORT, stdin: "buffered", liveOutput: false, signals: "group" },
    make({ local }) {
      const files = {
        upload: async (target, source, opts) => fsp.writeFile(target, source, { mode: opts?.mode ?? 0o644 }),
        download: async (target) => fs.createReadStream(target),
      };
      const combined = createFileStdioRunner({
        files,
        exec: async (request) => {
          const out = collect();
          const exit = await local.run(`exec 2>&1\n${request.command}`, { stdout: out.sink });
          return { exitCode: exit.exitCode, output: out.bytes().toString("latin1") };
        },
      });
      return { runner: withRemoteGroupKill(combined), files };
    },
  },
  "pid-signals": {
    capabilities: STREAM_TRANSPORT,
    make({ env, dirs }) {
      return pidSignalsRunner(env, dirs);
    },
  },
  channel: {
    capabilities: STREAM_TRANSPORT,
    make({ env, dirs }, leaseId) {
      const runner = withCommandChannel(pidSignalsRunner(env, dirs), { lease: leaseId, waitForStart: true });
      const tally = process.env.SIMULATED_VENDOR_CHANNEL_TALLY;
      if (!tally) return runner;
      // For the test: how many commands went over the channel and how many ran fresh, per lease.
      return {
        capabilities: runner.capabilities,
        run: (script, io) =>
          runner.run(script, io).finally(() => {
            const { overChannel, fresh } = commandChannelStatus(leaseId);
            fs.appendFileSync(tally, `${leaseId} ${overChannel} ${fresh}\n`);
          }),
      };
    },
  },
  "no-eof": {
    capabilities: { ...STREAM_TRANSPORT, stdin: "buffered" },
    make({ local }) {
      const noEof = {
        capabilities: { ...STREAM_TRANSPORT, stdinEof: false },
        run: (script, io) => {
          const held = new PassThrough();
          const input = io.stdin;
          if (typeof input === "string" || Buffer.isBuffer(input)) held.write(input);
          else if (input) input.on("data", (chunk) => held.write(chunk));
          return local.run(script, { ...io, stdin: held }).finally(() => held.end());
        },
      };
      return withLengthFramedStdin(noEof);
    },
  },
  "no-env": {
    capabilities: STREAM_TRANSPORT,
    make({ local }) {
      const noEnv = { capabilities: STREAM_TRANSPORT, run: (script, io) => local.run(script, { ...io, env: undefined }) };
      return withInlineEnv(noEnv);
    },
  },
};

export function simulatedVendorManifest(variant) {
  return defineSandboxProviderManifest({
    id: `test.simulated-vendor-${variant}`,
    version: "0.0.1",
    displayName: `Simulated vendor (${variant})`,
    description: "Kit adapter test fixture: local commands behind a simulated vendor wire shape. No isolation; tests only.",
    driver: { driverKey: `simulated-${variant}`, displayName: `Simulated ${variant}`, configSchema: config.jsonSchema },
    shape: { transport: transports[variant].capabilities, keepsLeases: true },
  });
}

export function simulatedVendorPlugin(variant) {
  const transport = transports[variant];
  const base = path.join(os.tmpdir(), `paperclip-simulated-vendor-${process.getuid?.() ?? "user"}`);
  const dirsOf = (id) => {
    const dir = path.join(base, id);
    return { dir, workspace: path.join(dir, "workspace"), home: path.join(dir, "home"), tmp: path.join(dir, "tmp") };
  };
  const handleOf = (id, record) => ({ providerLeaseId: id, expiresAt: record.expiresAt ? new Date(record.expiresAt) : null, labels: record.labels, dirs: dirsOf(id) });
  const made = (handle) => {
    const built = transport.make({ ...engine(handle.dirs, handle.providerLeaseId), dirs: handle.dirs }, handle.providerLeaseId);
    return "run" in built ? { runner: built } : built;
  };
  return defineSandboxProvider({
    driverKey: `simulated-${variant}`,
    config,
    transport: transport.capabilities,
    workspace: { existing: (handle) => handle.dirs.workspace, syncRoots: (handle) => [handle.dirs.dir] },
    shape: () => ({ variant }),
    options: { commandTimeoutMs: (c) => c.timeoutMs },
    keep: { reusable: (c) => c.reuseLease, by: "stop" },
    async create({ expiresAt, labels, created }) {
      const id = `sim-${randomUUID()}`;
      created(id);
      const dirs = dirsOf(id);
      for (const dir of [dirs.dir, dirs.workspace, dirs.home, dirs.tmp]) await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
      const record = { expiresAt: expiresAt ? expiresAt.toISOString() : null, labels };
      await fsp.writeFile(path.join(dirs.dir, "record.json"), JSON.stringify(record));
      return handleOf(id, record);
    },
    async get(ref) {
      if (!/^sim-[0-9a-f-]{36}$/.test(ref.providerLeaseId)) return null;
      const text = await fsp.readFile(path.join(dirsOf(ref.providerLeaseId).dir, "record.json"), "utf8").catch(() => null);
      return text === null ? null : handleOf(ref.providerLeaseId, JSON.parse(text));
    },
    async destroy(_ref, handle) {
      await endMarkedProcesses(MARKER, handle.providerLeaseId);
      await fsp.rm(handle.dirs.dir, { recursive: true, force: true });
    },
    stop: (handle) => endMarkedProcesses(MARKER, handle.providerLeaseId).then(() => undefined),
    runner: (handle) => made(handle).runner,
    files: (handle) => made(handle).files,
  }).plugin;
}
